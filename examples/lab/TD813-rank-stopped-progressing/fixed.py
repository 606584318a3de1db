"""DDP training fed by a loader thread per rank, every thread putting as many batches as taken.

Each rank's background thread reads its own shard file and puts batches on a queue; both
shards hold 96 samples, so every rank's thread puts exactly the `STEPS` batches the loop
takes, every rank runs every backward, and each all-reduce has all its partners. Runs as
2 gloo processes on 127.0.0.1: `python fixed.py` spawns them, `torchrun --nproc-per-node 2
fixed.py` launches them.
"""
# lab: nproc-per-node=2

import os
import queue
import socket
import threading

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS = 16, 6


def produce(batches: "queue.Queue[tuple[torch.Tensor, torch.Tensor]]", count: int) -> None:
    generator = torch.Generator().manual_seed(count)
    for _ in range(count):
        x = torch.randn(BATCH, 8, generator=generator)
        batches.put((x, (x[:, 0] > 0).long()))


def train() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    shard_sizes = [96, 96]  # samples in each rank's shard file
    batches: queue.Queue[tuple[torch.Tensor, torch.Tensor]] = queue.Queue()
    threading.Thread(
        target=produce, args=(batches, shard_sizes[rank] // BATCH), daemon=True
    ).start()
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for _ in range(STEPS):
        xb, yb = batches.get()
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
