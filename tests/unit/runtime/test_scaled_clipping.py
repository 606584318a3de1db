"""TD608 at run time: clipping gradients a GradScaler has not unscaled, however the step is
arranged (a plain loop, a trainer's helper method, `clip_grad_value_`)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torchdoctor  # noqa: E402
from tests.unit.runtime.fakes import codes  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _train(clip: str, unscale: bool, enabled: bool = True, steps: int = 8) -> set[str]:
    return codes(_report(clip, unscale, enabled, steps))


def _report(clip: str, unscale: bool, enabled: bool = True, steps: int = 8) -> torchdoctor.Report:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", enabled=enabled)

    class Trainer:  # the clip lives in a helper, as trainers arrange it
        def clip(self) -> None:
            if clip == "norm":
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            elif clip == "value":
                torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
            else:  # the total norm read for logging only
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))

        def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            if unscale:
                scaler.unscale_(optimizer)
            self.clip()
            scaler.step(optimizer)
            scaler.update()

    trainer = Trainer()
    with torchdoctor.watch() as session:
        for _ in range(steps):
            trainer.step(torch.randn(32, 8), torch.randn(32, 1))
    assert session.report is not None
    return session.report


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_a_clip_before_unscale_is_found(clip: str) -> None:
    assert "TD608" in _train(clip, unscale=False)


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_a_clip_after_unscale_is_quiet(clip: str) -> None:
    assert "TD608" not in _train(clip, unscale=True)


def test_a_disabled_scaler_scales_nothing() -> None:
    assert "TD608" not in _train("norm", unscale=False, enabled=False)


def test_a_norm_read_for_logging_clips_nothing() -> None:
    assert "TD608" not in _train("log", unscale=False)


def test_a_few_clips_are_not_enough_to_judge() -> None:
    assert "TD608" not in _train("norm", unscale=False, steps=2)


def test_clip_grad_value_is_restored_after_the_run() -> None:
    original = torch.nn.utils.clip_grad_value_
    _train("value", unscale=True, steps=3)
    assert torch.nn.utils.clip_grad_value_ is original


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_the_finding_names_the_clip_that_ran(clip: str) -> None:
    [found] = _report(clip, unscale=False).by_code("TD608")
    assert f"`clip_grad_{clip}_`" in found.message and "unscale_" in found.fix_hint
