"""DDP training whose rank 0 logs the loss averaged over every rank.

Each rank computes the loss of its own half of the global batch. The plain loop
all-reduces a detached copy of the loss (on every rank, before the rank-0 guard) and
prints the mean; the trainer sums its epoch's losses and batch counts in one tensor and
all-reduces that in a helper before rank 0 logs the mean. `python fixed.py` runs 2 gloo
ranks on the CPU; torchrun works too.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_loader(seed: int) -> tuple[DataLoader, DistributedSampler]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 8, generator=generator)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, seed=seed)
    return DataLoader(dataset, batch_size=32, sampler=sampler), sampler


def train_plain(rank: int) -> None:
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader, sampler = make_loader(1)
    step = 0
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if step % 4 == 0:
                mean = loss.detach().clone()
                dist.all_reduce(mean)
                mean /= dist.get_world_size()
                if rank == 0:
                    print(f"step {step}: train loss {mean.item():.4f}")
            step += 1


class Trainer:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.loader, self.sampler = make_loader(2)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def mean_over_ranks(self, total: float, count: int) -> float:
        sums = torch.tensor([total, float(count)], dtype=torch.float64)
        dist.all_reduce(sums)
        return (sums[0] / sums[1]).item()

    def fit(self, epochs: int = 2) -> None:
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            losses = []
            for x, y in self.loader:
                losses.append(self.train_step(x, y))
            mean = self.mean_over_ranks(sum(losses), len(losses))
            if self.rank == 0:
                print(f"epoch {epoch}: train loss {mean:.4f}")


def worker(rank: int, world_size: int, port: int) -> None:
    if port:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    else:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    train_plain(rank)
    Trainer(rank).fit()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    if "RANK" in os.environ:  # torchrun
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), 0)
    else:
        mp.spawn(worker, args=(2, free_port()), nprocs=2)


if __name__ == "__main__":
    main()
