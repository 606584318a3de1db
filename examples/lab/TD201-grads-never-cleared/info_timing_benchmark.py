"""A speed benchmark of one attention layer, in the style of a paper's appendix script.

It repeats one training step on the same random tensors and reports the time per step.
The loop never clears the gradients, so they pile up and the weights wander, which is
true and would be a bug in training; here nothing the benchmark prints depends on the
weights' values, so a maintainer leaves it.
"""

import time

import torch
from torch import nn


def bench_attention(steps: int = 20) -> float:
    torch.manual_seed(0)
    layer = nn.MultiheadAttention(embed_dim=32, num_heads=4, batch_first=True)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-4)
    hidden = torch.randn(4, 64, 32)
    target = torch.zeros(4, 64, 32)
    start = time.perf_counter()
    for _ in range(steps):
        out, _weights = layer(hidden, hidden, hidden)
        loss = ((out - target) ** 2).mean()
        loss.backward()
        optimizer.step()  # expect: TD201
    return (time.perf_counter() - start) / steps


if __name__ == "__main__":
    print(f"attention step: {bench_attention() * 1000:.2f} ms")
