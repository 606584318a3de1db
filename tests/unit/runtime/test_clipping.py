"""Gradient clipping that takes effect (TD616, TD617 at run time), in several shapes."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402

STEPS = 10


def model_and_optimizer() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def loss_of(model: Any) -> Any:
    x = torch.randn(16, 4)
    return nn.functional.mse_loss(model(x), x[:, :1])


def plain_loop(clip_after_step: bool, max_norm: float = 1.0) -> set[str]:
    model, optimizer = model_and_optimizer()
    with torchdoctor.watch() as session:
        for _ in range(STEPS):
            optimizer.zero_grad()
            loss_of(model).backward()
            if not clip_after_step:
                nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            if clip_after_step:
                nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return session.report.codes()


class Trainer:
    def __init__(self, clip_after_step: bool) -> None:
        self.model, self.optimizer = model_and_optimizer()
        self.clip_after_step = clip_after_step

    def _clip(self) -> None:
        torch.nn.utils.clip_grad.clip_grad_norm_(self.model.parameters(), 0.5)

    def _update(self) -> None:
        if not self.clip_after_step:
            self._clip()
        self.optimizer.step()
        if self.clip_after_step:
            self._clip()

    def fit(self) -> set[str]:
        with torchdoctor.watch() as session:
            for _ in range(STEPS):
                self.optimizer.zero_grad()
                loss_of(self.model).backward()
                self._update()
        return session.report.codes()


def closure_training(clip_after_step: bool) -> set[str]:
    model, optimizer = model_and_optimizer()

    def closure() -> Any:
        optimizer.zero_grad()
        loss = loss_of(model)
        loss.backward()
        if not clip_after_step:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return loss

    with torchdoctor.watch() as session:
        for _ in range(STEPS):
            optimizer.step(closure)
            if clip_after_step:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return session.report.codes()


SHAPES = {
    "loop": plain_loop,
    "trainer": lambda after: Trainer(after).fit(),
    "closure": closure_training,
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_clip_after_the_step_is_found(shape: str) -> None:
    assert "TD616" in SHAPES[shape](True)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_clip_before_the_step_is_quiet(shape: str) -> None:
    assert not SHAPES[shape](False) & {"TD616", "TD617"}


def test_a_norm_read_for_logging_after_the_step_is_quiet() -> None:
    assert "TD616" not in plain_loop(clip_after_step=True, max_norm=float("inf"))


def test_gradient_accumulation_clipped_before_its_step_is_quiet() -> None:
    model, optimizer = model_and_optimizer()
    with torchdoctor.watch() as session:
        for step in range(4 * STEPS):
            (loss_of(model) / 4).backward()
            if step % 4 == 3:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
    assert "TD616" not in session.report.codes()


def drained_generator(store_list: bool) -> tuple[set[str], list[Any]]:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    params = list(model.parameters()) if store_list else model.parameters()
    optimizer = torch.optim.SGD(params, lr=0.1)
    with warnings.catch_warnings(record=True) as shown, torchdoctor.watch() as session:
        warnings.simplefilter("always")
        for _ in range(STEPS):
            optimizer.zero_grad()
            loss_of(model).backward()
            nn.utils.clip_grad_norm_(params, 0.5)
            optimizer.step()
    return session.report.codes(), [w for w in shown if "empty generator" in str(w.message)]


def test_a_drained_parameter_generator_is_found() -> None:
    codes, _ = drained_generator(store_list=False)
    assert "TD617" in codes


def test_a_stored_parameter_list_is_quiet() -> None:
    codes, _ = drained_generator(store_list=True)
    assert "TD617" not in codes


def test_the_clip_function_is_restored_after_the_run() -> None:
    module = importlib.import_module("torch.nn.utils.clip_grad")
    before = module._clip_grads_with_norm_
    plain_loop(clip_after_step=False)
    assert module._clip_grads_with_norm_ is before
