"""CPU training that asks torch for twice as many threads as there are CPUs "for speed".

Intra-op threads beyond the CPUs the process may run on do not add compute: OpenMP
threads wait for each other at every parallel region, and the surplus ones wait for a
CPU, so each matmul and convolution gets slower. The same happens silently in a container
limited to a few CPUs (a cgroup quota), where torch still sees every CPU of the host.
"""

import os

import torch
from torch import nn


def configure() -> None:
    torch.set_num_threads(2 * (os.cpu_count() or 1))  # "hyper-threads: twice the cores"
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
