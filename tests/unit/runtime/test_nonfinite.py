"""NaN/Inf in the loss (TD213), gradients (TD212) and parameters (TD214), and their origin."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp, step  # noqa: E402

HERE = str(Path(__file__).resolve())


class Log(nn.Module):
    """log() of raw activations: NaN wherever an activation is negative."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


def nan_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), Log(), nn.Linear(16, 3))


def train(model: nn.Module, steps: int = 10, **options: object) -> torchdoctor.Report:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch(**options) as w:  # type: ignore[arg-type]
        for _ in range(steps):
            step(model, optimizer)
    return w.report


def test_nan_loss_is_found_at_its_first_step() -> None:
    torch.manual_seed(0)
    report = train(nan_model())
    [loss] = report.by_code("TD213")
    assert loss.evidence["first_step"] == 1
    assert loss.location.path is not None and loss.location.path.endswith("training.py")
    # One bad step made every parameter NaN: the finding says the origin is lost and how
    # to find it.
    assert "--localise-nan" in loss.message
    assert report.by_code("TD212") and report.by_code("TD214")


def test_localisation_from_the_start_names_the_module() -> None:
    torch.manual_seed(0)
    report = train(nan_model(), localise_non_finite=True)
    [loss] = report.by_code("TD213")
    assert loss.evidence["origin"] == "1"  # nn.Sequential index of the Log module
    assert "starts in `1`" in loss.message


def test_exploding_parameters_are_named() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.3**s)
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(60):
            step(model, optimizer)
            scheduler.step()
    [params] = w.report.by_code("TD214")
    assert "every parameter of `Sequential`" in params.message or "`0`" in params.message
    assert params.evidence["first_step"] > 1


# -- quiet -----------------------------------------------------------------------------------


def test_healthy_training_is_quiet() -> None:
    torch.manual_seed(0)
    assert not train(mlp(), steps=30).codes() & {"TD212", "TD213", "TD214"}


def test_huge_but_finite_loss_is_not_non_finite() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-20)
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(10):
            x, y = batch()
            optimizer.zero_grad()
            (nn.functional.cross_entropy(model(x), y) * 1e15).backward()
            optimizer.step()
    assert not w.report.codes() & {"TD212", "TD213", "TD214"}


def test_nan_in_evaluation_outputs_only_is_not_a_training_nan() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for _ in range(10):
            step(model, optimizer)
        with torch.no_grad():
            model(torch.full((4, 8), float("nan")))  # a bad evaluation input, not training
    assert not w.report.codes() & {"TD212", "TD213", "TD214"}
