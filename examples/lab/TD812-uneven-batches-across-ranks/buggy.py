"""DDP training where each rank reads its own shard, and the shards differ in length.

Rank 0's shard has 160 samples (5 batches of 32), rank 1's has 120 (4 batches). DDP
all-reduces gradients in every backward, so rank 0's fifth backward waits for a partner
that has already finished its epoch: with NCCL the job hangs until the collective
timeout (30 minutes by default), with gloo rank 0 dies when rank 1 leaves. Runs as 2 gloo
processes on 127.0.0.1: `python buggy.py` spawns them, `torchrun --nproc-per-node 2
buggy.py` launches them.
"""
# lab: nproc-per-node=2

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def train() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(280, 8)
    y = (x[:, 0] > 0).long()
    rank = dist.get_rank()
    shard = slice(0, 160) if rank == 0 else slice(160, 280)  # one "file" per rank
    loader = DataLoader(TensorDataset(x[shard], y[shard]), batch_size=32, shuffle=True)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for xb, yb in loader:  # expect: TD812
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
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
