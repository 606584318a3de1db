"""The same DDP script without the debugging switch.

For a debugging run, set it from the shell (`TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...`)
so it never reaches the training runs.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def configure() -> None:
    torch.manual_seed(0)


def init_distributed() -> None:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python fixed.py`: a group of one process
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
