"""A Lightning-style loop with an EMA callback and a frozen, pretrained teacher.

The callback keeps an exponential moving average of the weights with weights that sum to
1; the teacher, pretrained separately and frozen, is called at every step and never
changes, as a teacher should.
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
        self.ema = copy.deepcopy(model).requires_grad_(False)

    @torch.no_grad()
    def on_train_batch_end(self, model: nn.Module) -> None:
        assert self.ema is not None
        for ema_p, p in zip(self.ema.parameters(), model.parameters()):
            ema_p.mul_(self.decay).add_(p, alpha=1 - self.decay)


def make_net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))


class Module(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = make_net()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], teacher: nn.Module
    ) -> torch.Tensor:
        x, y = batch
        with torch.no_grad():
            soft = teacher(x).squeeze(1)
        out = self(x).squeeze(1)
        return nn.functional.mse_loss(out, y) + 0.5 * nn.functional.mse_loss(out, soft)


def pretrained_teacher(weights: torch.Tensor) -> nn.Module:
    """The teacher as a checkpoint would give it: trained before this run."""
    torch.manual_seed(1)
    teacher = make_net()
    optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(5)
    for _ in range(50):
        x = torch.randn(64, 16, generator=generator)
        loss = nn.functional.mse_loss(teacher(x).squeeze(1), x @ weights)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return teacher


def fit(
    module: Module,
    teacher: nn.Module,
    callbacks: list[Callback],
    weights: torch.Tensor,
    steps: int,
) -> None:
    generator = torch.Generator().manual_seed(2)
    optimizer = torch.optim.AdamW(module.parameters(), lr=3e-3)
    for callback in callbacks:
        callback.on_fit_start(module)
    for _ in range(steps):
        x = torch.randn(64, 16, generator=generator)
        loss = module.training_step((x, x @ weights), teacher)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for callback in callbacks:
            callback.on_train_batch_end(module)


def main() -> None:
    weights = torch.randn(16, generator=torch.Generator().manual_seed(3))
    state = pretrained_teacher(weights).state_dict()
    teacher = make_net()
    teacher.load_state_dict(state)
    teacher.eval().requires_grad_(False)
    torch.manual_seed(0)
    fit(Module(), teacher, [EMACallback()], weights, steps=300)


if __name__ == "__main__":
    main()
