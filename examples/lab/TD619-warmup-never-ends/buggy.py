"""A regression model whose learning-rate warm-up is longer than its training.

# lab: max-steps=2000

The warm-up was written for a long run (`LinearLR(total_iters=5000)` stepped per batch),
but the script trains for 600 steps: the learning rate climbs during the whole run and
never reaches the 0.05 that was chosen. The second version is a hand-written warm-up, a
`LambdaLR` whose length is given in samples while the scheduler is stepped per batch.
"""

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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)  # expect[run]: TD619
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=5000)
    for x, y in batches(steps):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return scheduler.get_last_lr()[0]


def train_lambda_warmup(steps: int = 600, batch_size: int = 32) -> float:
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # expect[run]: TD619
    warmup_samples = 100_000
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_samples)
    )
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
