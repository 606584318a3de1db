"""DDP training whose forward calls the wrapped module, not the DDP wrapper.

`model.module(x)` runs the network without DDP's forward, so DDP never prepares the
gradient all-reduce: after `backward()` every rank holds the gradients of its own batch
only, each optimizer steps its own copy of the model, and the replicas drift apart while
the job looks healthy. Runs as 2 gloo processes on 127.0.0.1: `python buggy.py` spawns
them, `torchrun --nproc-per-node 2 buggy.py` launches them.
"""
# lab: nproc-per-node=2

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def train() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model = DDP(net)  # expect: TD811
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model.module(xb), yb)
            loss.backward()
            optimizer.step()
    dist.destroy_process_group()


def spawned(rank: int, world_size: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    train()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    if "RANK" in os.environ:  # started by torchrun
        train()
    else:
        mp.spawn(spawned, args=(2, free_port()), nprocs=2)
