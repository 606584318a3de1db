"""A Lightning-style loop whose EMA callback drifts away from the model.

The callback keeps an exponential moving average of the weights, but adds the model's
weights without weighting them by `1 - decay`: the "average" grows toward 100 times the
model, and every evaluation made with it is meaningless.
"""

import copy

import torch
from torch import nn


class Callback:
    def on_fit_start(self, model: nn.Module) -> None: ...

    def on_train_batch_end(self, model: nn.Module) -> None: ...


class EMACallback(Callback):
    def __init__(self, decay: float = 0.99) -> None:
        self.decay = decay
        self.ema: nn.Module | None = None

    def on_fit_start(self, model: nn.Module) -> None:
        self.ema = copy.deepcopy(model).requires_grad_(False)  # expect[run]: TD623

    @torch.no_grad()
    def on_train_batch_end(self, model: nn.Module) -> None:
        assert self.ema is not None
        for ema_p, p in zip(self.ema.parameters(), model.parameters()):
            ema_p.mul_(self.decay).add_(p)


class Module(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self(x).squeeze(1), y)


def fit(module: Module, callbacks: list[Callback], steps: int) -> None:
    generator = torch.Generator().manual_seed(2)
    weights = torch.randn(16, generator=generator)
    optimizer = torch.optim.AdamW(module.parameters(), lr=3e-3)
    for callback in callbacks:
        callback.on_fit_start(module)
    for _ in range(steps):
        x = torch.randn(64, 16, generator=generator)
        loss = module.training_step((x, x @ weights))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for callback in callbacks:
            callback.on_train_batch_end(module)


def main() -> None:
    torch.manual_seed(0)
    fit(Module(), [EMACallback()], steps=300)


if __name__ == "__main__":
    main()
