"""Two-process (gloo, CPU) data-parallel training organised as a Trainer
class: the loader is built once in __init__ with a DistributedSampler, and
fit() runs one _run_epoch() per epoch."""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class IndexedPoints(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(3)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, :2].sum(1, keepdim=True) > 0).float()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


class DDPTrainer:
    def __init__(self, rank, world_size):
        self.rank = rank
        self.model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        dataset = IndexedPoints(512)
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=11)
        self.loader = DataLoader(dataset, batch_size=16, sampler=sampler)
        self.loss_fn = nn.BCEWithLogitsLoss()

    def _run_epoch(self, epoch):
        self.loader.sampler.set_epoch(epoch)
        seen, total = [], 0.0
        for xb, yb, idx in self.loader:
            self.optimizer.zero_grad()
            loss = self.loss_fn(self.model(xb), yb)
            loss.backward()
            self.optimizer.step()
            seen.extend(idx[:2].tolist())
            total += loss.item()
        return seen[:6], total / len(self.loader)

    def fit(self, epochs):
        orders = []
        for epoch in range(epochs):
            first_ids, loss = self._run_epoch(epoch)
            orders.append(tuple(first_ids))
            if self.rank == 0:
                print(f"epoch {epoch} loss={loss:.4f} first_ids={list(first_ids)}")
        if self.rank == 0:
            print(f"distinct epoch orders={len(set(orders))}/{epochs}")


def worker(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    trainer = DDPTrainer(rank, world_size)
    trainer.fit(epochs=3)
    dist.barrier()
    dist.destroy_process_group()


def pick_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    mp.spawn(worker, args=(2, pick_port()), nprocs=2, join=True)


if __name__ == "__main__":
    main()
