"""Fixed: the schedule divides the learning rate by 10 every 60 steps (gamma=0.1)."""

import torch
from torch import nn

FEATURES = 16


def make_data(count: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    weights = torch.randn(FEATURES, 1, generator=generator)
    return x, x @ weights + 0.1 * torch.randn(count, 1, generator=generator)


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=60, gamma=0.1)
    for step in range(150):
        batch = torch.randint(0, len(x), (64,))
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 15 == 0:
            print(f"step {step}: loss {loss.item():.4g}")

    fit_with_outliers()


def fit_with_outliers(steps: int = 300) -> None:
    """Not divergence: a regression with 3% corrupted labels (x80), clipped correctly.

    Batches that hold a corrupted label have losses 100x the others, at random, so window
    medians jump up and down; the low tail of each window keeps falling.
    """
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(2048, FEATURES, generator=generator)
    y = x[:, :1] + 0.1 * torch.randn(2048, 1, generator=generator)
    corrupt = torch.rand(2048, 1, generator=generator) < 0.03
    y = torch.where(corrupt, y * 80.0, y)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(steps):
        batch = torch.randint(0, len(x), (32,))
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[batch]), y[batch])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    print(f"with outliers: last loss {loss.item():.4g}")


if __name__ == "__main__":
    main()
