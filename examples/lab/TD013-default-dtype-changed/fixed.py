"""Keeps the float32 default and asks for float64 only where it is needed.

The model trains in float32; the one computation that needs the extra precision (a sum of
many small losses) is done in float64 explicitly.
"""

import torch
from torch import nn


def configure() -> None:
    torch.manual_seed(0)


def main() -> None:
    configure()
    model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    inputs = torch.randn(512, 32)
    targets = inputs.pow(2).mean(dim=1, keepdim=True)
    total = torch.zeros((), dtype=torch.float64)
    for start in range(0, 512, 64):
        optimizer.zero_grad()
        loss = criterion(model(inputs[start:start + 64]), targets[start:start + 64])
        loss.backward()
        optimizer.step()
        total += loss.detach().to(torch.float64)
    print(f"parameters are {next(model.parameters()).dtype}, mean loss {total.item() / 8:.4f}")


if __name__ == "__main__":
    main()
