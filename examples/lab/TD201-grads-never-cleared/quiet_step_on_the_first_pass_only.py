"""Test-time adaptation taken once: a single step on the first of several passes.

The loop evaluates the model on several noisy copies of a batch; only on the first pass
(`if attempt == 0:`) does it take one entropy-minimising step. There is never a second step
in this loop to pick up gradients left by the first, so no `zero_grad()` is needed here.
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(32, 8)
    votes = torch.zeros(32, 4)
    for attempt in range(5):
        noisy = batch + 0.05 * torch.randn_like(batch)
        if attempt == 0:
            probabilities = model(noisy).softmax(dim=1)
            entropy = -(probabilities * probabilities.clamp_min(1e-8).log()).sum(dim=1).mean()
            entropy.backward()
            optimizer.step()
        with torch.no_grad():
            votes += model(noisy).softmax(dim=1)
    print(votes.argmax(dim=1)[:8].tolist())


if __name__ == "__main__":
    main()
