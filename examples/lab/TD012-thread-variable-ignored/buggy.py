"""Limits torch to one thread per process by setting OMP_NUM_THREADS after importing torch.

The script starts several worker processes and wants each to use one thread. torch reads
OMP_NUM_THREADS once, when it is imported; setting it afterwards changes nothing, so every
process still runs one thread per core and they all compete for the same CPUs.
"""

import os

import torch
from torch import nn

LAB_REQUIRES_CPUS = 2  # with one CPU, torch already runs one thread


def configure() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # too late: torch is already imported
    torch.manual_seed(0)


def main() -> None:
    configure()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(512, 64), torch.randint(0, 4, (512,))
    for start in range(0, 512, 64):
        optimizer.zero_grad()
        loss = criterion(model(inputs[start:start + 64]), targets[start:start + 64])
        loss.backward()
        optimizer.step()
    print(f"OMP_NUM_THREADS=1 but torch uses {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
