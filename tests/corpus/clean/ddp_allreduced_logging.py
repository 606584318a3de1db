"""DDP with metrics averaged over ranks before rank 0 logs them.

Each rank's loss covers only its shard, so the logged number is the all-reduced mean: a
detached copy of the loss goes through `dist.all_reduce` and is divided by the world size,
and only rank 0 prints it. Accuracy is counted the same way (correct and total summed over
ranks). `python ddp_allreduced_logging.py` spawns 2 gloo processes; under torchrun the group
comes from the environment.
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


def train():
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(9)
    x = torch.randn(240, 6, generator=generator)
    y = (x[:, 0] - x[:, 1] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, seed=4)
    loader = DataLoader(dataset, batch_size=20, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        running = torch.zeros(3)  # loss sum, correct, seen
        for inputs, labels in loader:
            optimizer.zero_grad()
            logits = model(inputs)
            loss = nn.functional.cross_entropy(logits, labels)
            loss.backward()
            optimizer.step()
            running += torch.stack(
                [
                    loss.detach() * len(labels),
                    (logits.argmax(dim=1) == labels).sum().float(),
                    torch.tensor(float(len(labels))),
                ]
            )
        dist.all_reduce(running)
        if rank == 0:
            print(
                f"epoch {epoch}: loss {running[0] / running[2]:.3f} "
                f"accuracy {running[1] / running[2]:.2%} over {world_size} ranks"
            )
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
