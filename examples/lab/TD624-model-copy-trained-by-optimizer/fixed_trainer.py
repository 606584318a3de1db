"""A BYOL-style trainer whose momentum encoder only follows the online encoder.

The trainer builds its optimizer from the online encoder and the predictor, and the
momentum encoder, frozen, computes its projections under `torch.no_grad()`: only the
momentum updates change it.
"""

import copy

import torch
from torch import nn


class BYOL(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.online = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
        self.predictor = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.momentum_encoder = copy.deepcopy(self.online).requires_grad_(False)

    def loss(self, view_a: torch.Tensor, view_b: torch.Tensor) -> torch.Tensor:
        prediction = nn.functional.normalize(self.predictor(self.online(view_a)), dim=1)
        with torch.no_grad():
            target = nn.functional.normalize(self.momentum_encoder(view_b), dim=1)
        return (2 - 2 * (prediction * target).sum(1)).mean()


class Trainer:
    def __init__(self, module: BYOL, momentum: float = 0.99) -> None:
        self.module, self.momentum = module, momentum
        trained = [*module.online.parameters(), *module.predictor.parameters()]
        self.optimizer = torch.optim.Adam(trained, lr=1e-3)
        self.generator = torch.Generator().manual_seed(6)

    def _views(self) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(64, 16, generator=self.generator)
        noise = torch.randn(2, 64, 16, generator=self.generator) * 0.1
        return x + noise[0], x + noise[1]

    @torch.no_grad()
    def _momentum_update(self) -> None:
        pairs = zip(self.module.momentum_encoder.parameters(), self.module.online.parameters())
        for target_p, p in pairs:
            target_p.lerp_(p, 1 - self.momentum)

    def _step(self) -> None:
        loss = self.module.loss(*self._views())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self._momentum_update()

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            self._step()


def main() -> None:
    torch.manual_seed(0)
    Trainer(BYOL()).fit(300)


if __name__ == "__main__":
    main()
