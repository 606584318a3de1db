"""A pose trainer that switches to a second stage at a milestone epoch, with a new schedule.

At `epoch == STAGE_TWO` the loop resets the learning rate by hand, switches to harder
augmented data and builds a new `MultiStepLR` for the stage: the schedule restarts once,
on purpose, and is stepped from then on. It is not rebuilt on every pass.
"""

import torch
from torch import nn
from torch.optim.lr_scheduler import MultiStepLR

STAGE_TWO = 4
EPOCHS = 8


def train_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, noise: float) -> float:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 10, generator=generator)
    y = x.sum(1, keepdim=True)
    x = x + noise * torch.randn(64, 10, generator=generator)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(10, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)
    noise = 0.0
    for epoch in range(EPOCHS):
        loss = train_epoch(model, optimizer, noise)
        scheduler.step()
        if epoch == STAGE_TWO:
            for group in optimizer.param_groups:
                group["lr"] = 0.05
            scheduler = MultiStepLR(optimizer, milestones=[2], gamma=0.1)
            noise = 0.1
        print(f"epoch {epoch} loss {loss:.4f} lr {optimizer.param_groups[0]['lr']:.4f}")


if __name__ == "__main__":
    main()
