"""DDP with uneven inputs on purpose, handled by `model.join()`.

Each rank reads its own shard and the shards differ in length (96 and 80 samples), which
would leave the longer rank waiting in an all-reduce nobody else calls. The loop runs
inside `with model.join():`, so a rank that runs out of batches shadows the collectives of
the others until every rank is done. `python ddp_join_uneven_inputs.py` spawns 2 gloo
processes; under torchrun the group comes from the environment.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def shard(rank):
    generator = torch.Generator().manual_seed(100 + rank)
    size = 96 if rank == 0 else 80
    x = torch.randn(size, 5, generator=generator)
    return TensorDataset(x, x.sum(dim=1, keepdim=True))


def train():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    loader = DataLoader(shard(dist.get_rank()), batch_size=16, shuffle=True)
    model = DDP(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with model.join():
        for inputs, targets in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
    dist.destroy_process_group()


def spawned(rank, world_size, port):
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    train()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    if "RANK" in os.environ:
        train()
    else:
        mp.spawn(spawned, args=(2, free_port()), nprocs=2)
