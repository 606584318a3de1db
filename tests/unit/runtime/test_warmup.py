"""A learning-rate warm-up still rising when the run ends (TD619)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import torchdoctor  # noqa: E402
from torchdoctor.runtime.detectors.warmup import still_warming  # noqa: E402

lr_scheduler = torch.optim.lr_scheduler


def train(make: Callable[[Any], Any] | None, steps: int, max_steps: int | None = None) -> Any:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = make(optimizer) if make is not None else None
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    with torchdoctor.watch(max_steps=max_steps) as session:  # swallows StopTraining
        for _ in range(steps):
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
    return session.report


def _linear_long(optimizer: Any) -> Any:
    return lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=5000)


def _lambda_in_samples(optimizer: Any) -> Any:
    return lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 64_000))


def _sequential_late_milestone(optimizer: Any) -> Any:
    warmup = lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=2000)
    decay = lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
    return lr_scheduler.SequentialLR(optimizer, [warmup, decay], milestones=[2000])


def _cosine_with_warmup(optimizer: Any) -> Any:
    def factor(step: int) -> float:
        return (step + 1) / 30 if step < 30 else 0.5 * (1 + math.cos(math.pi * step / 600))

    return lr_scheduler.LambdaLR(optimizer, factor)


def _linear_ends(optimizer: Any) -> Any:
    return lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=400)


def _one_cycle(optimizer: Any) -> Any:
    return lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=600)


@pytest.mark.parametrize(
    "make",
    [_linear_long, _lambda_in_samples, _sequential_late_milestone],
    ids=["linear-lr", "lambda-lr-in-samples", "sequential-lr"],
)
def test_a_warmup_longer_than_the_run_is_flagged(make: Any) -> None:
    found = train(make, steps=600).by_code("TD619")
    assert len(found) == 1
    assert found[0].evidence["optimizer_steps"] == 600
    assert found[0].evidence["lr_max"] < found[0].evidence["base_lr"]


def test_the_stated_length_is_given() -> None:
    found = train(_linear_long, steps=600).by_code("TD619")
    assert found[0].evidence["warmup_length"] == 5000
    assert "5000" in found[0].message


@pytest.mark.parametrize(
    ("make", "steps"),
    [
        (_linear_long, 300),  # too short to judge
        (_cosine_with_warmup, 600),
        (_linear_ends, 600),
        (_one_cycle, 600),
        (None, 600),
    ],
    ids=["short-run", "cosine-after-warmup", "warmup-that-ends", "one-cycle", "no-scheduler"],
)
def test_schedules_that_end_their_warmup_or_short_runs_are_quiet(make: Any, steps: int) -> None:
    assert "TD619" not in train(make, steps=steps).codes()


def test_a_run_stopped_at_max_steps_is_not_judged() -> None:
    assert "TD619" not in train(_linear_long, steps=800, max_steps=600).codes()


def test_still_warming_needs_a_rise_at_every_late_step() -> None:
    rising = [0.001 * (i + 1) for i in range(600)]
    assert still_warming(rising, 1.0)
    assert not still_warming(rising, 0.6)  # reached its base
    flat_end = rising[:500] + [rising[499]] * 100
    assert not still_warming(flat_end, 1.0)
    assert not still_warming(rising[:499], 1.0)
