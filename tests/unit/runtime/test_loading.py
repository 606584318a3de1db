"""TD904 at run time: a ``load_state_dict(strict=False)`` that loaded few of the keys it
was given, whatever arranges the call.

Three shapes: a plain script, a trainer whose ``resume()`` helper loads, and a callback
that loads pretrained weights at the start of training.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def checkpoint(kind: str) -> dict[str, Any]:
    state = Net().state_dict()
    if kind == "prefixed":  # saved from a DDP model
        return {f"module.{k}": v for k, v in state.items()}
    if kind == "backbone":  # a partial checkpoint that fits
        return {k: v for k, v in state.items() if k.startswith("backbone.")}
    return state


def train(model: nn.Module, steps: int = 3) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()


def plain(kind: str) -> set[str]:
    with torchdoctor.watch() as session:
        model = Net()
        model.load_state_dict(checkpoint(kind), strict=False)
        train(model)
    return session.report.codes()


class Trainer:
    def __init__(self) -> None:
        self.model = Net()

    def resume(self, state: dict[str, Any]) -> None:
        self._restore(state)

    def _restore(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state, False)


def trainer(kind: str) -> set[str]:
    with torchdoctor.watch() as session:
        runner = Trainer()
        runner.resume(checkpoint(kind))
        train(runner.model)
    return session.report.codes()


def callbacks(kind: str) -> set[str]:
    model = Net()
    on_start: list[Callable[[], Any]] = [
        lambda: model.load_state_dict(checkpoint(kind), strict=False)
    ]
    with torchdoctor.watch() as session:
        for callback in on_start:
            callback()
        train(model)
    return session.report.codes()


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_loose_load_whose_keys_do_not_fit_is_found(shape: Callable[[str], set[str]]) -> None:
    assert "TD904" in shape("prefixed")


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_partial_checkpoint_that_fits_is_quiet(shape: Callable[[str], set[str]]) -> None:
    assert "TD904" not in shape("backbone")


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_full_checkpoint_is_quiet(shape: Callable[[str], set[str]]) -> None:
    assert "TD904" not in shape("full")


def test_the_call_returns_what_it_always_returned() -> None:
    model, state = Net(), checkpoint("prefixed")
    expected = Net().load_state_dict(state, strict=False)
    with torchdoctor.watch() as session:
        result = model.load_state_dict(state, strict=False)
    assert result == expected
    found = session.report.by_code("TD904")[0]
    assert found.evidence["keys_loaded"] == 0 and found.evidence["keys_given"] == 4


def test_a_strict_load_that_fails_raises_as_before() -> None:
    with torchdoctor.watch() as session, pytest.raises(RuntimeError, match="Missing key"):
        Net().load_state_dict(checkpoint("prefixed"))
    assert "TD904" not in session.report.codes()


def test_the_wrapper_is_gone_after_the_watch() -> None:
    original = nn.Module.load_state_dict
    with torchdoctor.watch():
        assert nn.Module.load_state_dict is not original
    assert nn.Module.load_state_dict is original


# --- TD912 at run time: a load given the module's own tensors ----------------------------


def best_kept(copy_it: bool) -> set[str]:
    """Keep the best weights of a short training run, then restore them."""
    import copy

    with torchdoctor.watch() as session:
        model = Net()
        best = None
        for epoch in range(3):
            train(model, steps=2)
            if epoch == 0:
                best = copy.deepcopy(model.state_dict()) if copy_it else model.state_dict()
        assert best is not None
        model.load_state_dict(best)
    return session.report.codes()


def test_restoring_a_snapshot_kept_without_a_copy_is_found() -> None:
    assert "TD912" in best_kept(copy_it=False)
    assert "TD912" not in best_kept(copy_it=True)


def test_a_snapshot_restored_through_a_trainer_is_found_with_its_evidence() -> None:
    with torchdoctor.watch() as session:
        runner = Trainer()
        kept = runner.model.state_dict()
        train(runner.model)
        runner.resume(kept)
    [found] = session.report.by_code("TD912")
    assert found.evidence == {"tensors_given": 4, "tensors_shared": 4}
    assert found.location.line is not None and "Net" in found.message


def test_fresh_tensors_partial_dicts_and_assign_are_quiet() -> None:
    with torchdoctor.watch() as session:
        model, other = Net(), Net()
        model.load_state_dict(other.state_dict())  # another module's tensors
        model.load_state_dict(  # some keys are the model's own, some fresh
            {**model.state_dict(), "head.bias": torch.zeros(3)}
        )
        model.load_state_dict(checkpoint("full"), assign=True)
        model.load_state_dict(model.state_dict(), assign=True)  # assign: storages match
    assert "TD912" not in session.report.codes()
