"""A DDP job where every rank saves and resumes its own checkpoint file.

The file name carries the rank (`checkpoint_rank{rank}.pt`), so each process reads back
what it wrote from its own GPU, and `torch.load` returns the tensors to that same device:
nothing piles onto cuda:0. Only resuming on a machine without that GPU would fail, as in
a single process, so the missing `map_location` is information here.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def checkpoint_path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"checkpoint_rank{rank}.pt")


def train(folder: str, resume: bool) -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DistributedDataParallel(nn.Linear(16, 1).cuda(), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    start = 0
    if resume:
        state = torch.load(os.path.join(folder, f"checkpoint_rank{rank}.pt"))  # expect: TD901
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"] + 1
    for step in range(start, 100):
        x = torch.randn(32, 16, device="cuda")
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    torch.save(state, checkpoint_path(folder, rank))
    dist.destroy_process_group()


if __name__ == "__main__":
    train(os.environ.get("CKPT_DIR", "checkpoints"), resume=os.path.exists("checkpoints"))
