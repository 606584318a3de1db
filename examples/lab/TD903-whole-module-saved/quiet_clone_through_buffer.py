"""Cloning a model through an in-memory buffer before fine-tuning one of the copies.

`torch.save` into an `io.BytesIO` and `torch.load` straight back is a deep copy that also
works for modules `copy.deepcopy` cannot handle: nothing reaches a file, so no class path
is recorded anywhere and no later load depends on it.
"""

import io

import torch
from torch import nn


def clone(module: nn.Module) -> nn.Module:
    with io.BytesIO() as buffer:
        torch.save(module, buffer)
        buffer.seek(0)
        return torch.load(buffer, weights_only=False)


def main() -> None:
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    tuned = clone(base)
    optimizer = torch.optim.SGD(tuned.parameters(), lr=0.05)
    inputs = torch.randn(128, 6)
    targets = inputs[:, :2].sum(dim=1, keepdim=True)
    for _ in range(20):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(tuned(inputs), targets)
        loss.backward()
        optimizer.step()
    drift = (tuned[0].weight - base[0].weight).abs().max().item()
    print(f"loss {loss.item():.4f}; the base copy is untouched, drift {drift:.4f}")


if __name__ == "__main__":
    main()
