"""DDP training fed by a loader thread per rank, where one rank's thread comes up short.

Each rank's background thread reads its own shard file and puts batches on a queue; the
training loop takes `STEPS` batches, a number worked out from the first shard (96 samples).
Rank 1's shard has 80 samples, so its thread puts one batch fewer than the loop takes: at
the last step rank 1 blocks in `queue.get()` while rank 0 waits in DDP's gradient
all-reduce for it. Nothing fails: the job sits there until the collective
timeout (30 minutes by default). Runs as 2 gloo processes on 127.0.0.1: `python buggy.py`
spawns them, `torchrun --nproc-per-node 2 buggy.py` launches them (and never ends).
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
    shard_sizes = [96, 80]  # samples in each rank's shard file
    batches: queue.Queue[tuple[torch.Tensor, torch.Tensor]] = queue.Queue()
    threading.Thread(
        target=produce, args=(batches, shard_sizes[rank] // BATCH), daemon=True
    ).start()
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for _ in range(STEPS):
        xb, yb = batches.get()  # expect: TD813
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()  # expect: TD813
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
