"""A script that wraps its model in DataParallel only when it is given several GPUs.

With the default single device the checkpoint's keys are plain; with `--ngpu 2` they all
start with `module.`. The format then depends on the device count, a real but small
inconsistency many projects accept: information, not a warning.
"""

import argparse
import os
import tempfile

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ngpu", type=int, default=1)
    args = parser.parse_args([])
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    if args.ngpu > 1:
        net = nn.DataParallel(net, device_ids=list(range(args.ngpu)))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    inputs, labels = torch.randn(128, 8), torch.randint(0, 2, (128,))
    for _ in range(10):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(inputs), labels)
        loss.backward()
        optimizer.step()
    path = os.path.join(tempfile.gettempdir(), "td805-multi-gpu-only.pt")
    torch.save(net.state_dict(), path)  # expect[lint]: TD805
    print(f"loss {loss.item():.4f}; saved {sorted(torch.load(path))[:2]}")


if __name__ == "__main__":
    main()
