"""DDP with BatchNorm (buffers broadcast from rank 0) and a sharded validation pass.

DDP keeps `broadcast_buffers=True` (the default), so every forward starts from rank 0's
running statistics. After each epoch every rank evaluates its shard of a validation set
through a `DistributedSampler(shuffle=False)` (no `set_epoch` needed) in `eval()` mode and
under `no_grad()`, calling the wrapped module; the correct/total counts are summed over
ranks. `python ddp_batchnorm_validation.py` spawns 2 gloo processes; under torchrun the
group comes from the environment.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def datasets():
    generator = torch.Generator().manual_seed(21)
    x = torch.randn(320, 10, generator=generator)
    y = (x[:, :2].sum(dim=1) > 0).long()
    return TensorDataset(x[:256], y[:256]), TensorDataset(x[256:], y[256:])


def train():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    train_set, val_set = datasets()
    sampler = DistributedSampler(train_set, seed=7)
    loader = DataLoader(train_set, batch_size=16, sampler=sampler)
    val_loader = DataLoader(
        val_set, batch_size=16, sampler=DistributedSampler(val_set, shuffle=False)
    )
    net = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        model.train()
        for inputs, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
        model.eval()
        counts = torch.zeros(2)
        with torch.no_grad():
            for inputs, labels in val_loader:
                predictions = model.module(inputs).argmax(dim=1)
                counts += torch.tensor([float((predictions == labels).sum()), float(len(labels))])
        dist.all_reduce(counts)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: validation accuracy {counts[0] / counts[1]:.2%}")
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
