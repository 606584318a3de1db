"""A launcher that trains with spawned DDP workers, then evaluates the result itself.

`mp.spawn(train_worker, ...)` runs `train_worker` in every rank; rank 0 saves the weights.
Once the workers are done, the launcher, which is one process, loads that file to evaluate
it. No rank piles its copy onto cuda:0 there: only a machine without the GPU the weights
were saved from would fail to load them, as in a single-process program, so the missing
`map_location` is information, not the DDP warning.
"""

import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

WORLD_SIZE = 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def train_worker(rank: int, folder: str) -> None:
    use_gpu = torch.cuda.is_available() and torch.cuda.device_count() >= WORLD_SIZE
    dist.init_process_group("nccl" if use_gpu else "gloo", rank=rank, world_size=WORLD_SIZE)
    device = torch.device(f"cuda:{rank}" if use_gpu else "cpu")
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(16, 1).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(20):
        x = torch.randn(32, 16, device=device)
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(folder, "model.pt"))
    dist.barrier()
    dist.destroy_process_group()


def evaluate(folder: str) -> float:
    model = nn.Linear(16, 1)
    model.load_state_dict(torch.load(os.path.join(folder, "model.pt")))  # expect: TD901
    with torch.no_grad():
        return model(torch.randn(64, 16)).pow(2).mean().item()


def main() -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(train_worker, args=(folder,), nprocs=WORLD_SIZE)
        print(f"held-out loss: {evaluate(folder):.4f}")


if __name__ == "__main__":
    main()
