"""FSDP2 (`fully_shard`) training that clips with `torch.nn.utils.clip_grad_norm_`.

`fully_shard` turns the parameters into DTensors, and torch's `clip_grad_norm_` reduces
the norms of DTensor gradients across the mesh, so the plain call is correct here. The
step lives in a small trainer class; its loss is all-reduced before rank 0 prints it.
`python lint_fsdp2_fully_shard_clip.py` spawns 2 gloo processes on the CPU.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Trainer:
    def __init__(self, world_size: int) -> None:
        self.model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
        mesh = init_device_mesh("cpu", (world_size,))
        for layer in self.model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(self.model, mesh=mesh)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.world_size = world_size

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
        self.optimizer.step()
        return loss.detach()

    def mean_over_ranks(self, value: torch.Tensor) -> float:
        total = value.clone()
        dist.all_reduce(total)
        return total.item() / self.world_size


def train(rank: int, world_size: int) -> None:
    torch.manual_seed(0)
    trainer = Trainer(world_size)
    generator = torch.Generator().manual_seed(rank)
    for step in range(6):
        x = torch.randn(16, 8, generator=generator)
        loss = trainer.train_step(x, x[:, :2].cos())
        mean = trainer.mean_over_ranks(loss)
        if dist.get_rank() == 0:
            print(f"step {step}: loss {mean:.4f}")


def worker(rank: int, world_size: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    train(rank, world_size)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
        train(dist.get_rank(), dist.get_world_size())
        dist.destroy_process_group()
    else:
        mp.spawn(worker, args=(2, free_port()), nprocs=2)
