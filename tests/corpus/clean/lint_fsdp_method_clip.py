"""FSDP1 (FullyShardedDataParallel) training that clips through the root module's method.

The gradients are sharded, so the norm is taken by `model.clip_grad_norm_`, which
all-reduces the shard norms; the loss printed on rank 0 is averaged over ranks first.
`python lint_fsdp_method_clip.py` spawns 2 gloo processes on the CPU; under torchrun the
group comes from the environment.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy


def train(rank: int, world_size: int) -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    model = FSDP(net, device_id=torch.device("cpu"), sharding_strategy=ShardingStrategy.FULL_SHARD)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(rank)
    for step in range(6):
        x = torch.randn(16, 8, generator=generator)
        y = x[:, :2].sin()
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = model.clip_grad_norm_(max_norm=1.0)
        optimizer.step()
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        if rank == 0 and step % 2 == 0:
            print(f"step {step}: loss {reduced.item() / world_size:.4f} grad norm {norm:.3f}")


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
