"""A launcher that turns on cuDNN benchmarking and spawns workers that ask for
deterministic algorithms.

`mp.spawn` starts each worker as a fresh interpreter: it runs `worker()`, not the main
block, and inherits no cuDNN flag from the launcher. The launcher's `benchmark = True`
never reaches the processes that train, which run with benchmarking off and
determinism on.
"""

import torch
import torch.multiprocessing as mp
from torch import nn


def worker(rank: int, steps: int) -> None:
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    assert not torch.backends.cudnn.benchmark  # the launcher's flag is not inherited
    model = nn.Sequential(nn.Conv1d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(24, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 2, 8), torch.randn(8, 1)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    print(f"worker {rank} done")


if __name__ == "__main__":
    torch.backends.cudnn.benchmark = True
    mp.spawn(worker, nprocs=2, args=(3,))
