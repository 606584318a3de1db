"""CPU training with one intra-op thread per CPU the process may run on.

`os.sched_getaffinity(0)` counts the CPUs this process is allowed to use (a taskset or a
pinned container shrinks it), unlike `os.cpu_count()`, which counts the whole machine. A
container CPU limit (`docker --cpus`, a Kubernetes limit) is a cgroup quota instead, which
the affinity does not show: it is read from `/sys/fs/cgroup/cpu.max`.
"""

import math
import os
from pathlib import Path

import torch
from torch import nn


def usable_cpus() -> int:
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
    except (OSError, ValueError):
        return cpus
    return cpus if quota == "max" else max(1, min(cpus, math.ceil(int(quota) / int(period))))


def configure() -> None:
    torch.set_num_threads(usable_cpus())
    torch.manual_seed(0)


def main() -> None:
    configure()
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(1024, 256), torch.randint(0, 10, (1024,))
    for start in range(0, 1024, 128):
        optimizer.zero_grad()
        loss = criterion(model(inputs[start:start + 128]), targets[start:start + 128])
        loss.backward()
        optimizer.step()
    print(f"{torch.get_num_threads()} threads, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
