"""Gradient accumulation over four micro-batches, summing instead of averaging.

The optimizer steps every `ACCUMULATION` batches, but each micro-batch loss goes into
`backward()` undivided: every step applies four times the gradient of one batch. The
second trainer accumulates the same way with its step split into methods, and the third
runs its step from callbacks, with the loss scaled by a GradScaler (a loss scale, not an
average).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATION = 4


def make_loader() -> DataLoader:
    data = TensorDataset(torch.randn(256, 10), torch.randn(256, 1))
    return DataLoader(data, batch_size=16, shuffle=True)


def train_plain(epochs: int = 2) -> float:
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss = torch.zeros(())
    for _ in range(epochs):
        for i, (x, y) in enumerate(make_loader()):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()  # expect: TD618
            if (i + 1) % ACCUMULATION == 0:
                optimizer.step()
                optimizer.zero_grad()
    return loss.item()


class Trainer:
    def __init__(self, accumulation: int = ACCUMULATION) -> None:
        self.model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.accumulation = accumulation

    def compute_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.model(x), y)

    def train_step(self, index: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = self.compute_loss(x, y)
        loss.backward()  # expect: TD618
        if (index + 1) % self.accumulation == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()
        return loss.detach()

    def fit(self, epochs: int = 2) -> float:
        loss = torch.zeros(())
        for _ in range(epochs):
            for i, (x, y) in enumerate(make_loader()):
                loss = self.train_step(i, x, y)
        return loss.item()


def train_with_callbacks(epochs: int = 2) -> float:
    """The step lives in callbacks that a small engine calls; the loss is scaled for mixed
    precision by a GradScaler."""
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    criterion = nn.MSELoss()
    seen = [0]
    last = [torch.zeros(())]

    def on_batch(x: torch.Tensor, y: torch.Tensor) -> None:
        loss = criterion(model(x), y)
        scaler.scale(loss).backward()  # expect[run]: TD618
        last[0] = loss.detach()

    def on_batch_end() -> None:
        seen[0] += 1
        if seen[0] % ACCUMULATION == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()

    callbacks = [on_batch, lambda *_: on_batch_end()]
    for _ in range(epochs):
        for x, y in make_loader():
            for callback in callbacks:
                callback(x, y)
    return float(last[0])


def main() -> None:
    torch.manual_seed(0)
    print(f"plain: {train_plain():.3f}  trainer: {Trainer().fit():.3f}")
    print(f"callbacks: {train_with_callbacks():.3f}")


if __name__ == "__main__":
    main()
