"""A DDP trainer class whose epoch loss is reduced to rank 0 before rank 0 logs it.

The step method returns the detached local loss; `fit` keeps a running (sum, count)
tensor, `dist.reduce`s it to rank 0 in a helper and only then logs the mean with
`logging` on rank 0. Each rank also prints its own, labelled, last loss.
`python lint_ddp_trainer_reduced_logging.py` spawns 2 gloo processes on the CPU.
"""

import logging
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

logger = logging.getLogger("trainer")


class Trainer:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        generator = torch.Generator().manual_seed(3)
        x = torch.randn(256, 6, generator=generator)
        dataset = TensorDataset(x, x[:, :1] * 2.0 - x[:, 1:2])
        self.sampler = DistributedSampler(dataset, seed=3)
        self.loader = DataLoader(dataset, batch_size=16, sampler=self.sampler)
        self.model = DDP(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def reduce_to_rank_zero(self, totals: torch.Tensor) -> torch.Tensor:
        dist.reduce(totals, dst=0)
        return totals

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            totals = torch.zeros(2)
            last = torch.zeros(())
            for x, y in self.loader:
                last = self.train_step(x, y)
                totals += torch.stack([last * len(y), torch.tensor(float(len(y)))])
            print(f"[rank {self.rank}] epoch {epoch}: last batch loss {last.item():.4f}")
            totals = self.reduce_to_rank_zero(totals)
            if self.rank == 0:
                logger.warning("epoch %d: loss %.4f", epoch, (totals[0] / totals[1]).item())


def worker(rank: int, world_size: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    Trainer(rank).fit(epochs=2)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(worker, args=(2, free_port()), nprocs=2)
