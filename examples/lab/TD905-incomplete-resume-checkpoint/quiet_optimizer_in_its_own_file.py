"""A shape-fitting trainer that keeps the model and the optimizer in separate files.

One helper saves the decoder's weights with the epoch, another the optimizer's state
with the same epoch, each to its own folder; resuming reads both back. The model's file
alone lacks the optimizer, but the run's state is all on disk.
"""

import os
import tempfile

import torch
from torch import nn


def save_model(folder: str, decoder: nn.Module, epoch: int) -> None:
    torch.save({"epoch": epoch, "model_state_dict": decoder.state_dict()}, f"{folder}/model.pth")


def save_optimizer(folder: str, optimizer: torch.optim.Optimizer, epoch: int) -> None:
    torch.save(
        {"epoch": epoch, "optimizer_state_dict": optimizer.state_dict()},
        f"{folder}/optimizer.pth",
    )


def load(folder: str, decoder: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    model_state = torch.load(f"{folder}/model.pth", weights_only=True)
    decoder.load_state_dict(model_state["model_state_dict"])
    optimizer_state = torch.load(f"{folder}/optimizer.pth", weights_only=True)
    optimizer.load_state_dict(optimizer_state["optimizer_state_dict"])
    return optimizer_state["epoch"] + 1


def train(folder: str, epochs: int) -> float:
    torch.manual_seed(0)
    decoder = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
    start = load(folder, decoder, optimizer) if os.path.exists(f"{folder}/model.pth") else 0
    loss = torch.zeros(())
    for epoch in range(start, epochs):
        points = torch.randn(64, 3)
        loss = nn.functional.l1_loss(decoder(points), points.norm(dim=1, keepdim=True) - 1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        save_model(folder, decoder, epoch)
        save_optimizer(folder, optimizer, epoch)
    return loss.item()


def main() -> None:
    folder = tempfile.mkdtemp(prefix="td905-split-")
    first = train(folder, 5)
    resumed = train(folder, 10)
    print(f"loss {first:.4f}, after resuming: {resumed:.4f}")


if __name__ == "__main__":
    main()
