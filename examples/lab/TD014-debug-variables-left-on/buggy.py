"""A DDP training script that still turns on TORCH_DISTRIBUTED_DEBUG=DETAIL.

DETAIL was set to find which rank passed a tensor of the wrong shape to a collective.
Left on, it wraps the process group so every collective first runs an extra collective
that checks all ranks agree, and DDP logs per-iteration details: steady overhead on every
step of every run, for a check that is only useful while debugging.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def configure() -> None:
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # while chasing a shape mismatch
    torch.manual_seed(0)


def init_distributed() -> None:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python buggy.py`: a group of one process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def main() -> None:
    configure()
    init_distributed()
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(256, 16), torch.randint(0, 2, (256,))
    for start in range(0, 256, 32):
        optimizer.zero_grad()
        loss = criterion(model(inputs[start:start + 32]), targets[start:start + 32])
        loss.backward()
        optimizer.step()
    print(f"rank {dist.get_rank()}: loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
