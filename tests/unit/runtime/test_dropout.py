"""TD506 at run time: functional dropout left at its default ``training=True`` inside a
module in eval mode, whatever arranges the call (forward, a helper method, a closure
built in ``__init__``), and quiet on every correct or intentional arrangement."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import torchdoctor  # noqa: E402


class Net(nn.Module):
    """A classifier whose dropout is applied by ``apply_dropout(self, hidden)``."""

    def __init__(self, apply_dropout: Callable[[nn.Module, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(8, 16), nn.Linear(16, 3)
        self.apply_dropout = apply_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.apply_dropout(self, torch.relu(self.hidden(x))))


def train_then_evaluate(make: Callable[[], nn.Module]) -> set[str]:
    with torchdoctor.watch() as session:
        model = make()  # built while watched: a closure over F.dropout gets the wrapper
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            F.cross_entropy(model(torch.randn(4, 8)), torch.tensor([0, 1, 2, 0])).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            model(torch.randn(4, 8))
    return session.report.codes()


class Helper(nn.Module):
    """F.dropout in a helper method that forward calls."""

    def __init__(self, **dropout: object) -> None:
        super().__init__()
        self.hidden, self.out, self.dropout = nn.Linear(8, 16), nn.Linear(16, 3), dropout

    def regularise(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, **self.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.regularise(self.hidden(x)))


class Closure(nn.Module):
    """A dropout closure built in ``__init__``, called through a nested function."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(8, 16), nn.Linear(16, 3)
        self.drop = functools.partial(F.dropout1d, p=0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def block(h: torch.Tensor) -> torch.Tensor:
            return self.drop(h.unsqueeze(0)).squeeze(0)

        return self.out(block(self.hidden(x)))


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(lambda: Net(lambda self, h: F.dropout(h, 0.5)), id="in-forward"),
        pytest.param(lambda: Helper(p=0.3), id="helper-method"),
        pytest.param(Closure, id="closure"),
        pytest.param(lambda: Net(lambda self, h: F.feature_alpha_dropout(h, 0.1)), id="alpha"),
    ],
)
def test_default_training_in_eval_mode_is_flagged(model: Callable[[], nn.Module]) -> None:
    assert "TD506" in train_then_evaluate(model)


def mc_dropout_layers(model: nn.Module) -> nn.Module:
    """Monte-Carlo dropout: the model evaluated with its dropout layers switched back on."""
    model.eval()
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.train()
    return model


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(
            lambda: Net(lambda self, h: F.dropout(h, 0.5, training=self.training)),
            id="follows-mode",
        ),
        pytest.param(lambda: Helper(p=0.3, training=False), id="explicit-false"),
        pytest.param(lambda: Helper(p=0.3, training=True), id="mc-explicit-true"),
        pytest.param(lambda: Helper(p=0.0), id="p-zero"),
        pytest.param(
            lambda: nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 3)),
            id="dropout-layer",
        ),
    ],
)
def test_correct_or_intentional_dropout_is_quiet(model: Callable[[], nn.Module]) -> None:
    assert "TD506" not in train_then_evaluate(model)


def augment(h: torch.Tensor) -> torch.Tensor:
    """A plain function (no module's method): it has no mode to follow."""
    return F.dropout(h, 0.1)


def test_dropout_outside_any_module_is_quiet() -> None:
    with torchdoctor.watch() as session:
        model = nn.Linear(8, 3).eval()
        with torch.no_grad():
            model(augment(torch.randn(4, 8)))
    assert "TD506" not in session.report.codes()


def test_function_taking_a_model_first_is_not_its_method() -> None:
    def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return model(F.dropout(x, 0.1))  # input noise, not the model's own dropout

    with torchdoctor.watch() as session, torch.no_grad():
        predict(nn.Linear(8, 3).eval(), torch.randn(4, 8))
    assert "TD506" not in session.report.codes()


def test_training_mode_forward_is_quiet() -> None:
    with torchdoctor.watch() as session:
        Helper(p=0.5).train()(torch.randn(4, 8))
    assert "TD506" not in session.report.codes()


def test_mc_dropout_layers_in_eval_model_are_quiet() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 3))
    with torchdoctor.watch() as session, torch.no_grad():
        mc_dropout_layers(model)(torch.randn(4, 8))
    assert "TD506" not in session.report.codes()


def test_functionals_are_restored_and_script_still_compiles() -> None:
    originals = {name: getattr(F, name) for name in ("dropout", "alpha_dropout")}

    class Scripted(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.dropout(x, 0.5, training=self.training)

    with torchdoctor.watch():
        assert F.dropout is not originals["dropout"]
        scripted = torch.jit.script(Scripted().eval())
        assert torch.equal(scripted(torch.ones(3)), torch.ones(3))
    assert {name: getattr(F, name) for name in originals} == originals


def test_the_finding_names_the_module_and_the_rate() -> None:
    with torchdoctor.watch() as session:
        model = nn.Sequential(Helper(p=0.3)).eval()
        model(torch.randn(4, 8))
    (hit,) = [f for f in session.report.findings if f.code == "TD506"]
    assert hit.evidence["module"] == "0" and hit.evidence["p"] == 0.3
