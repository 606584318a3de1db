"""DDP with gradient accumulation: `no_sync()` on all micro-batches but the last.

Four micro-batches make one optimizer step. The first three run under `model.no_sync()`,
so DDP only accumulates locally; the fourth runs outside it and DDP all-reduces the summed
gradients once. The loss is divided by the number of micro-batches so the step matches one
large batch. `python ddp_no_sync_accumulation.py` spawns 2 gloo processes; under torchrun
the group comes from the environment.
"""

import contextlib
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ACCUMULATE = 4


def train():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(256, 12, generator=generator)
    y = x[:, :4].sum(dim=1, keepdim=True)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, seed=2)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        optimizer.zero_grad()
        for index, (inputs, targets) in enumerate(loader):
            last = (index + 1) % ACCUMULATE == 0
            context = contextlib.nullcontext() if last else model.no_sync()
            with context:
                loss = nn.functional.mse_loss(model(inputs), targets) / ACCUMULATE
                loss.backward()
            if last:
                optimizer.step()
                optimizer.zero_grad()
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
