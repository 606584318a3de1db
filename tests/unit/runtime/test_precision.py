"""TD621: updates that low-precision parameters without a float32 copy cannot represent.

Three shapes: a plain loop, a trainer class whose step lives in helpers, and an optimizer
stepped from a closure.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

import torchdoctor  # noqa: E402


def net(dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 1)).to(dtype)


def batch(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(32, 16)
    return x.to(dtype), x[:, :2].sum(1, keepdim=True)


def plain(dtype: torch.dtype, lr: float) -> set[str]:
    model = net(dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(12):
            x, y = batch(dtype)
            optimizer.zero_grad()
            F.mse_loss(model(x).float(), y).backward()
            optimizer.step()
    return session.report.codes()


class Trainer:
    def __init__(self, dtype: torch.dtype, lr: float) -> None:
        self.dtype = dtype
        self.model = net(dtype)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

    def _loss(self) -> torch.Tensor:
        x, y = batch(self.dtype)
        return F.mse_loss(self.model(x).float(), y)

    def _step(self) -> None:
        self.optimizer.zero_grad()
        self._loss().backward()
        self.optimizer.step()

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            self._step()


def trainer(dtype: torch.dtype, lr: float) -> set[str]:
    with torchdoctor.watch(sample_every=1) as session:
        Trainer(dtype, lr).fit(12)
    return session.report.codes()


def closure(dtype: torch.dtype, lr: float) -> set[str]:
    model = net(dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(12):
            x, y = batch(dtype)

            def evaluate(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
                optimizer.zero_grad()
                loss = F.mse_loss(model(x).float(), y)
                loss.backward()
                return loss

            optimizer.step(evaluate)
    return session.report.codes()


SHAPES = [plain, trainer, closure]


@pytest.mark.parametrize("shape", SHAPES)
def test_bfloat16_weights_whose_updates_round_away_are_found(
    shape: Callable[[torch.dtype, float], set[str]],
) -> None:
    assert "TD621" in shape(torch.bfloat16, 1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_float32_weights_at_the_same_rate_are_quiet(
    shape: Callable[[torch.dtype, float], set[str]],
) -> None:
    assert "TD621" not in shape(torch.float32, 1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_bfloat16_weights_with_steps_they_can_hold_are_quiet(
    shape: Callable[[torch.dtype, float], set[str]],
) -> None:
    assert "TD621" not in shape(torch.bfloat16, 3e-2)


def test_an_eps_that_float16_cannot_hold_is_found() -> None:
    model = net(torch.float16)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8)
    with torchdoctor.watch() as session:
        for _ in range(2):
            x, y = batch(torch.float16)
            optimizer.zero_grad()
            F.mse_loss(model(x).float(), y).backward()
            optimizer.step()
    found = [f for f in session.report.by_code("TD621") if "eps" in f.evidence]
    assert found and found[0].evidence["eps"] == 1e-8


def test_an_eps_that_bfloat16_holds_is_quiet() -> None:
    model = net(torch.bfloat16)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2, eps=1e-8)
    with torchdoctor.watch() as session:
        for _ in range(2):
            x, y = batch(torch.bfloat16)
            optimizer.zero_grad()
            F.mse_loss(model(x).float(), y).backward()
            optimizer.step()
    assert "TD621" not in session.report.codes()
