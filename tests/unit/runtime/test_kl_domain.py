"""``kl_div`` judged on the values it receives (TD305 input, TD309 target), however the
distillation step is arranged."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

from tests.unit.runtime.shapes import SHAPES, train  # noqa: E402

TEACHER = nn.Linear(6, 5)


def batch() -> tuple[Any, Any]:
    x = torch.randn(16, 6)
    return x, x  # the target is the teacher's view of the same inputs


def student() -> Any:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 5))


def distillation(
    input_of: Any, target_of: Any, log_target: bool = False, module: bool = False
) -> Any:
    criterion = nn.KLDivLoss(reduction="batchmean", log_target=log_target)

    def loss_of(model: Any, x: Any, teacher_x: Any) -> Any:
        with torch.no_grad():
            teacher = TEACHER(teacher_x)
        inputs, targets = input_of(model(x)), target_of(teacher)
        if module:
            return criterion(inputs, targets)
        return F.kl_div(inputs, targets, reduction="batchmean", log_target=log_target)

    return loss_of


def log_probs(scores: Any) -> Any:
    return F.log_softmax(scores, dim=-1)


def probs(scores: Any) -> Any:
    return F.softmax(scores, dim=-1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("module", [False, True])
def test_probabilities_as_the_input_are_found(shape: str, module: bool) -> None:
    report = train(shape, student(), distillation(probs, probs, module=module), batch)
    [found] = report.by_code("TD305")
    assert found.location.object == "kl_div" and found.location.line is not None
    assert 0 < found.evidence["max_input"] <= 1


@pytest.mark.parametrize("shape", SHAPES)
def test_a_target_of_log_probabilities_without_log_target_is_found(shape: str) -> None:
    report = train(shape, student(), distillation(log_probs, log_probs), batch)
    [found] = report.by_code("TD309")
    assert found.evidence["max_target"] <= 0 and found.evidence["log_target"] is False
    assert "TD305" not in report.codes()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("target_of", "log_target"), [(probs, False), (log_probs, True)], ids=["probs", "log"]
)
def test_log_probabilities_against_a_matching_target_are_quiet(
    shape: str, target_of: Any, log_target: bool
) -> None:
    report = train(shape, student(), distillation(log_probs, target_of, log_target), batch)
    assert not {"TD305", "TD309"} & report.codes()


def test_the_patch_is_gone_after_the_run() -> None:
    original = F.kl_div
    train("loop", student(), distillation(log_probs, probs), batch, steps=2)
    assert F.kl_div is original
