"""Targets that carry a gradient into the trained network (TD222 at run time)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

from tests.unit.runtime.shapes import SHAPES, train  # noqa: E402

GAMMA = 0.9


def transitions() -> tuple[Any, Any]:
    states = torch.randn(32, 6)
    return states, torch.randn(32, 6)  # states, next states


def q_network() -> Any:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def bootstrap(detach: bool, loss: Any = F.mse_loss) -> Any:
    def loss_of(q_net: Any, states: Any, next_states: Any) -> Any:
        q = q_net(states).max(1).values
        if detach:
            with torch.no_grad():
                target = 1.0 + GAMMA * q_net(next_states).max(1).values
        else:
            target = 1.0 + GAMMA * q_net(next_states).max(1).values
        return loss(q, target)

    return loss_of


@pytest.mark.parametrize("shape", SHAPES)
def test_a_bootstrap_target_with_its_graph_is_found(shape: str) -> None:
    report = train(shape, q_network(), bootstrap(detach=False), transitions)
    [found] = report.by_code("TD222")
    assert "2.weight" in found.evidence["trained_parameters"]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_bootstrap_target_under_no_grad_is_quiet(shape: str) -> None:
    assert "TD222" not in train(shape, q_network(), bootstrap(detach=True), transitions).codes()


def swapped_bootstrap(detach: bool) -> Any:
    def loss_of(q_net: Any, states: Any, next_states: Any) -> Any:
        q = q_net(states).max(1).values
        if detach:
            with torch.no_grad():
                target = 1.0 + GAMMA * q_net(next_states).max(1).values
        else:
            target = 1.0 + GAMMA * q_net(next_states).max(1).values
        return F.mse_loss(target, q)

    return loss_of


@pytest.mark.parametrize("shape", SHAPES)
def test_a_fixed_target_written_first_is_quiet(shape: str) -> None:
    report = train(shape, q_network(), swapped_bootstrap(detach=True), transitions)
    assert "TD222" not in report.codes()


def test_a_target_with_its_graph_written_first_is_still_found() -> None:
    report = train("loop", q_network(), swapped_bootstrap(detach=False), transitions)
    assert "TD222" in report.codes()


def test_a_huber_bootstrap_target_is_found() -> None:
    loss_of = bootstrap(detach=False, loss=F.smooth_l1_loss)
    assert "TD222" in train("loop", q_network(), loss_of, transitions).codes()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_consistency_loss_between_two_predictions_is_quiet(shape: str) -> None:
    def consistency(model: Any, x: Any, noise: Any) -> Any:
        return F.mse_loss(model(x + 0.1 * noise), model(x - 0.1 * noise))

    assert "TD222" not in train(shape, q_network(), consistency, transitions).codes()


def test_a_target_from_a_frozen_teacher_is_left_to_the_model_check() -> None:
    teacher = q_network().requires_grad_(False)

    def distill(student: Any, x: Any, _: Any) -> Any:
        return F.mse_loss(student(x), teacher(x))

    assert "TD222" not in train("loop", q_network(), distill, transitions).codes()


def test_a_target_requiring_grad_of_no_trained_parameter_is_quiet() -> None:
    anchor = torch.zeros(32, requires_grad=True)  # a leaf no optimizer holds

    def to_anchor(model: Any, x: Any, _: Any) -> Any:
        return F.mse_loss(model(x).sum(1), anchor * 2)

    assert "TD222" not in train("loop", q_network(), to_anchor, transitions).codes()
