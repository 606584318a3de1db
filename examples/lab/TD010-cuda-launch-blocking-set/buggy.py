"""A training script that still sets CUDA_LAUNCH_BLOCKING=1 from an old debugging session.

The variable was added to find which kernel raised "device-side assert triggered" (CUDA
reports errors asynchronously, at some later call). Left in, it makes every kernel launch
wait until the GPU has finished it: the CPU can no longer queue the next kernels while
the GPU works, and a model made of many small kernels runs at a fraction of its speed.
"""

import os

import torch
from torch import nn


def configure() -> None:
    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # to locate the failing kernel
    torch.manual_seed(0)


def main() -> None:
    configure()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(512, 32), torch.randint(0, 10, (512,))
    for start in range(0, 512, 64):
        x, y = inputs[start:start + 64].to(device), targets[start:start + 64].to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
