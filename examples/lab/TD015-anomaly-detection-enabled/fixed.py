"""Trains with anomaly detection off, and checks the loss cheaply instead.

A `torch.isfinite(loss)` check per step costs one small reduction; anomaly mode is kept
for a one-off run, in a `with torch.autograd.detect_anomaly():` block, when a NaN needs
tracing to its op.
"""

import torch
from torch import nn


def configure() -> None:
    torch.manual_seed(0)


def main() -> None:
    configure()
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    inputs, targets = torch.randn(512, 64), torch.randint(0, 10, (512,))
    for start in range(0, 512, 64):
        optimizer.zero_grad()
        loss = criterion(model(inputs[start:start + 64]), targets[start:start + 64])
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss at batch {start // 64}")
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
