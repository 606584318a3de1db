"""The same runs with warm-ups that end: a few percent of the training, in the unit of
`scheduler.step()` calls (optimizer steps), followed by a cosine decay in the first.

# lab: max-steps=2000
"""

import math

import torch
from torch import nn


def batches(steps: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(8, 1, generator=generator)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=generator)
        yield x, x @ weight + 0.1 * torch.randn(32, 1, generator=generator)


def train_linear_warmup(steps: int = 600) -> float:
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=30)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps - 30)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, decay], milestones=[30])
    for x, y in batches(steps):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return scheduler.get_last_lr()[0]


def train_lambda_warmup(steps: int = 600) -> float:
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    warmup_steps = steps // 20

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / (steps - warmup_steps)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    for x, y in batches(steps, seed=1):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return scheduler.get_last_lr()[0]


def main() -> None:
    torch.manual_seed(0)
    print(f"final lr: linear {train_linear_warmup():.2e}, lambda {train_lambda_warmup():.2e}")


if __name__ == "__main__":
    main()
