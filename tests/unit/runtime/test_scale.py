"""Vanishing (TD215) and exploding (TD216) gradients (TD606 is in test_updates.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import mlp, step  # noqa: E402

CODES = {"TD215", "TD216", "TD606"}


def train(
    model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, scheduler: object = None
) -> torchdoctor.Report:
    with torchdoctor.watch(sample_every=2) as w:
        for _ in range(steps):
            step(model, optimizer)
            if scheduler is not None:
                scheduler.step()  # type: ignore[attr-defined]
    return w.report


def deep_sigmoid() -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(8, 32), nn.Sigmoid()]
    for _ in range(10):
        layers += [nn.Linear(32, 32), nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(32, 3))


def test_vanishing_gradients_in_a_deep_sigmoid_stack() -> None:
    torch.manual_seed(0)
    model = deep_sigmoid()
    report = train(model, torch.optim.SGD(model.parameters(), lr=0.1), 40)
    [found] = report.by_code("TD215")
    assert found.evidence["earliest"] == "0.weight"
    assert found.evidence["ratio"] < 1e-4
    # The root cause is reported once: no "lr too small" and no "parameters never change".
    assert not report.by_code("TD606") and not report.by_code("TD218")


def test_gradients_exploding_under_a_growing_learning_rate() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.12**s)
    [found] = train(model, optimizer, 70, scheduler).by_code("TD216")
    assert found.evidence["growth"] >= 100


def test_learning_rate_below_float32_resolution_means_nothing_changes() -> None:
    torch.manual_seed(0)
    model = mlp()
    [found] = train(model, torch.optim.SGD(model.parameters(), lr=1e-9), 30).by_code("TD218")
    assert "float32 resolution" in found.message and "lr 1e-09" in found.message


# -- quiet -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda p: torch.optim.Adam(p, lr=1e-3),
        lambda p: torch.optim.Adam(p, lr=1e-2),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: torch.optim.AdamW(p, lr=3e-4, weight_decay=0.1),
    ],
    ids=["adam-1e-3", "adam-1e-2", "sgd-momentum", "adamw"],
)
def test_healthy_optimizers_are_quiet(make_optimizer: object) -> None:
    torch.manual_seed(0)
    model = mlp(dropout=0.1)
    assert not train(model, make_optimizer(model.parameters()), 60).codes() & CODES  # type: ignore[operator]


def test_warmup_from_a_tiny_learning_rate_is_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1e-6, total_iters=20)
    assert not train(model, optimizer, 60, scheduler).codes() & CODES


def test_zero_initialised_output_layer_is_not_an_explosion() -> None:
    torch.manual_seed(0)
    model = mlp()
    nn.init.zeros_(model[2].weight)  # early-layer gradients start at exactly zero
    assert not train(model, torch.optim.Adam(model.parameters(), lr=1e-3), 60).codes() & CODES


def test_deep_relu_network_with_residual_scale_is_not_vanishing() -> None:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(8, 64), nn.ReLU()]
    for _ in range(8):
        layers += [nn.Linear(64, 64), nn.LayerNorm(64), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(64, 3))
    assert not train(model, torch.optim.Adam(model.parameters(), lr=1e-3), 40).codes() & CODES
