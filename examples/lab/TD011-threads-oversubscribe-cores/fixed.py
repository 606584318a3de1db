"""CPU training with one intra-op thread per CPU the process may run on.

`os.sched_getaffinity(0)` counts the CPUs this process is allowed to use (a taskset or a
pinned container shrinks it), unlike `os.cpu_count()`, which counts the whole machine.
"""

import os

import torch
from torch import nn


def configure() -> None:
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
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
