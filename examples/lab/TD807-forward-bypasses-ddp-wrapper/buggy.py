"""Data-parallel training whose forward goes around the DDP wrapper.

`ddp_model.module(x)` (and, in the trainer, the unwrapped `self.model`) runs the model
without DDP's hooks: gradients are never all-reduced and the ranks drift apart. Runs as
one process (world size 1) on the gloo backend.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def train_plain(steps: int = 20) -> float:
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    loss = torch.zeros(())
    for _ in range(steps):
        x, y = torch.randn(32, 12), torch.randint(0, 3, (32,))
        loss = nn.functional.cross_entropy(ddp_model.module(x), y)  # expect: TD807
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
        self.ddp_model = DDP(self.model)
        self.optimizer = torch.optim.SGD(self.ddp_model.parameters(), lr=0.1)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = nn.functional.cross_entropy(self.model(x), y)  # expect: TD807
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, steps: int = 20) -> float:
        return [self.train_step(torch.randn(32, 12), torch.randint(0, 3, (32,)))
                for _ in range(steps)][-1]


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'rdv')}",
                                rank=0, world_size=1)
        print(f"plain: {train_plain():.3f}  trainer: {Trainer().fit():.3f}")
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
