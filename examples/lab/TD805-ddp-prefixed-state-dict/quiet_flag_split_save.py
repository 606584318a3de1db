"""A script that wraps the model in DDP only when asked, and saves each case its own way.

The same flag (`use_ddp`) decides the wrap and the save: the wrapped branch saves
`model.module.state_dict()`, the other saves the plain model's `state_dict()`. Either way
the file has the plain model's keys and loads into it with `strict=True`.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))


def train_and_save(path: str, use_ddp: bool) -> None:
    torch.manual_seed(0)
    model = make_model()
    if use_ddp:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        model = DDP(model)
    inputs = torch.randn(256, 10)
    targets = (inputs[:, 0] > 0).long() + (inputs[:, 1] > 0).long()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(20):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    rank = dist.get_rank() if use_ddp else 0
    if rank == 0:
        if use_ddp:
            torch.save(model.module.state_dict(), path)
        else:
            torch.save(model.state_dict(), path)
    if use_ddp:
        dist.destroy_process_group()


def main() -> None:
    for use_ddp in (False, True):
        path = os.path.join(tempfile.gettempdir(), f"td805-flag-split-{use_ddp}.pt")
        train_and_save(path, use_ddp)
        make_model().load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    print("both checkpoints load into the plain model with strict=True")


if __name__ == "__main__":
    main()
