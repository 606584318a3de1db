"""A checkpoint helper wrapped in the project's own rank-zero decorator.

`@rank0` runs the function it wraps only where the process's rank is 0 and returns None
elsewhere, so the save inside `save_state` happens once however many ranks call it. Runs
as a one-process gloo group on the CPU.
"""

import functools
import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def rank0(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if dist.get_rank() == 0:
            return func(*args, **kwargs)
        return None

    return wrapper


@rank0
def save_state(model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, path: str) -> None:
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, path
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group(
            "gloo", init_method=f"file://{folder}/rendezvous", rank=0, world_size=1
        )
        torch.manual_seed(0)
        model = nn.Linear(8, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(torch.randn(16, 8)), torch.randn(16, 2)).backward()
            optimizer.step()
            save_state(model, optimizer, epoch, os.path.join(folder, "last.pt"))
            dist.barrier()
        print(sorted(torch.load(os.path.join(folder, "last.pt"), weights_only=True)))
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
