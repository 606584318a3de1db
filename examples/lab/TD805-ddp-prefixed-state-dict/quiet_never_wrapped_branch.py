"""A script that wraps its model in DDP only when several processes run, and saves the
plain model's weights in the branch where they never do.

`model.state_dict()` in the `else` of `if world_size > 1:` is the state of the model
itself: the wrap happens only under the same test, so its keys carry no `module.`
prefix. The distributed branch saves the wrapped module's own state.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def train(out: str, steps: int = 10) -> None:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    if world_size > 1:
        dist.init_process_group("gloo")
        model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        inputs = torch.randn(64, 10)
        targets = (inputs[:, 0] > 0).long()
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    if world_size > 1:
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
        dist.destroy_process_group()
    else:
        torch.save(model.state_dict(), os.path.join(out, "model.pt"))


if __name__ == "__main__":
    train(os.environ.get("OUT", "."))
