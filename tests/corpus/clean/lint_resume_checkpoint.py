"""Save and resume the whole training state: model, optimizer, scheduler, epoch."""

import os
import tempfile

import torch
from torch import nn


def save_state(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    epoch: int,
) -> None:
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "epoch": epoch,
        },
        path,
    )


def load_state(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> int:
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["epoch"]) + 1


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    path = os.path.join(tempfile.mkdtemp(), "state.pt")
    start = 0
    for epoch in range(start, 4):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        scheduler.step()
        save_state(path, model, optimizer, scheduler, epoch)
    print(f"resumed at epoch {load_state(path, model, optimizer, scheduler)}")


if __name__ == "__main__":
    main()
