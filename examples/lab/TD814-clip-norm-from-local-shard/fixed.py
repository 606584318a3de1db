"""FSDP training that clips gradients with FSDP's own `clip_grad_norm_` method.

The model is wrapped in `FullyShardedDataParallel` (sharded by default), so each rank
holds only its shard of every gradient. `model.clip_grad_norm_(max_norm)` all-reduces the
shard norms first: every rank prints the same total norm and clips by the same factor.
Two styles: a plain loop, and a trainer whose clipping is a helper.
`python buggy.py` runs 2 gloo ranks on the CPU; torchrun works too.
"""
# lab: nproc-per-node=2

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

CPU = torch.device("cpu")


def batches(rank: int, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(16, 8, generator=generator), torch.randn(16, 2, generator=generator))
            for _ in range(steps)]


def train_plain(rank: int) -> float:
    model = FSDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)), device_id=CPU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    norm = torch.zeros(())
    for x, y in batches(rank, 5):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = model.clip_grad_norm_(max_norm=0.5)
        optimizer.step()
    return float(norm)


class Trainer:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.model = FSDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)),
                          device_id=CPU, use_orig_params=True)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.max_norm = 0.5

    def clip(self) -> float:
        return float(self.model.clip_grad_norm_(self.max_norm))

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        nn.functional.mse_loss(self.model(x), y).backward()
        norm = self.clip()
        self.optimizer.step()
        return norm

    def fit(self) -> float:
        return [self.train_step(x, y) for x, y in batches(self.rank, 5)][-1]


def worker(rank: int, world_size: int, port: int) -> None:
    if port:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    else:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    print(f"rank {rank}: norm {train_plain(rank):.4f} (plain), {Trainer(rank).fit():.4f} "
          "(trainer)")
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
