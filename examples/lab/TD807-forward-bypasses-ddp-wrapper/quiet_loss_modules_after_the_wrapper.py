"""A DDP loop that computes its losses with loss modules kept on the wrapped model.

The forward goes through the wrapper (`scores = model(features)`), so DDP prepares its
gradient all-reduce for this pass; the losses are then taken with the model's own loss
modules through `model.module` (as dense-captioning code does). They hold no parameters,
and the backward reaches every parameter through the wrapper's output.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Proposer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(16, 4)
        self.bce_loss = nn.BCEWithLogitsLoss()
        self.reg_loss = nn.SmoothL1Loss()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layer(features)


def train(steps: int = 20) -> None:
    torch.manual_seed(0)
    model = DDP(Proposer())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        features = torch.randn(8, 16)
        labels, offsets = torch.randint(0, 2, (8, 2)).float(), torch.randn(8, 2)
        scores = model(features)
        cls_loss = model.module.bce_loss(scores[:, :2], labels)
        reg_loss = model.module.reg_loss(scores[:, 2:], offsets)
        loss = cls_loss + reg_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    train()
    dist.destroy_process_group()
