"""`torch.compile` applied once, before the loop, only when asked for.

Compiling is opt-in through an environment variable, so `python compile_outside_loop.py`
stays fast on a CPU. The checkpoint is written from the uncompiled module so its keys
carry no `_orig_mod.` prefix.
"""

import io
import os

import torch
from torch import nn


class ResidualMLP(nn.Module):
    def __init__(self, dim=32, classes=3):
        super().__init__()
        self.inp = nn.Linear(8, dim)
        self.block = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.out = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.inp(x)
        h = h + self.block(h)
        return self.out(h)


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(29)
    x = torch.randn(256, 8, generator=generator)
    y = torch.bucketize(x[:, 0] + x[:, 1], torch.tensor([-0.7, 0.7]))

    model = ResidualMLP()
    compiled = torch.compile(model) if os.environ.get("CORPUS_COMPILE") == "1" else model
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(40):
        permutation = torch.randperm(x.shape[0])
        for start in range(0, x.shape[0], 64):
            index = permutation[start:start + 64]
            optimizer.zero_grad()
            loss = criterion(compiled(x[index]), y[index])
            loss.backward()
            optimizer.step()
        if epoch % 10 == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    print(f"saved {len(buffer.getvalue())} bytes, keys: {list(model.state_dict())[:2]}")


if __name__ == "__main__":
    main()
