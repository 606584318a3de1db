"""Limits torch to one thread per process with torch.set_num_threads, which works any time.

The environment variable is still set, for the libraries that read it later, and now
agrees with what torch does. (Setting it before Python starts, in the shell or job file,
works too.)
"""

import os

import torch
from torch import nn

LAB_REQUIRES_CPUS = 2  # with one CPU, torch already runs one thread


def configure() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
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
    print(f"torch uses {torch.get_num_threads()} thread")


if __name__ == "__main__":
    main()
