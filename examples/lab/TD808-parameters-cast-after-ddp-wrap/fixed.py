"""Data-parallel training that casts the model to bfloat16 before wrapping it in DDP.

DDP builds its gradient buckets from the parameters in their final dtype, in both
styles. Runs as one process (world size 1) on the gloo backend.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def train_plain(steps: int = 10) -> float:
    model = nn.Linear(8, 1)
    model.bfloat16()
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    loss = torch.zeros(())
    for _ in range(steps):
        x, y = torch.randn(16, 8, dtype=torch.bfloat16), torch.randn(16, 1, dtype=torch.bfloat16)
        loss = nn.functional.mse_loss(ddp_model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def train_wrapped(steps: int = 10) -> float:
    ddp_model = DDP(nn.Linear(8, 1).to(torch.bfloat16))
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    loss = torch.zeros(())
    for _ in range(steps):
        x, y = torch.randn(16, 8, dtype=torch.bfloat16), torch.randn(16, 1, dtype=torch.bfloat16)
        loss = nn.functional.mse_loss(ddp_model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'rdv')}",
                                rank=0, world_size=1)
        for train in (train_plain, train_wrapped):
            try:
                print(f"{train.__name__}: {train():.3f}")
            except RuntimeError as error:
                print(f"{train.__name__} failed: {str(error).splitlines()[0]}")
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
