"""Reproducibility: two identically seeded training steps must agree (TD907)."""

from __future__ import annotations

import random
import time

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from torch import nn  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402

pytestmark = pytest.mark.needs_torch

CALLS = [0]
STEPS = [0]


def _batch() -> tuple:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(16, 5, generator=generator), torch.arange(16) % 3


class Augmented(nn.Module):
    """Adds noise to its input in training, from the source named."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.layer, self.dropout, self.source = nn.Linear(5, 3), nn.Dropout(0.2), source
        self.calls = 0

    def forward(self, x):
        if self.source == "fresh-numpy":
            x = x + torch.from_numpy(np.random.default_rng().normal(size=x.shape)).float()
        elif self.source == "clock-generator":
            generator = torch.Generator().manual_seed(time.perf_counter_ns())
            x = x + torch.randn(x.shape, generator=generator)
        elif self.source == "global-counter":
            CALLS[0] += 1
            x = x * CALLS[0]
        elif self.source == "global-numpy":
            x = x + float(np.random.normal())
        elif self.source == "random-module":
            x = x + random.gauss(0.0, 1.0)
        elif self.source == "torch":
            x = x + torch.randn_like(x)
        elif self.source == "instance-counter":
            self.calls += 1
            x = x * self.calls
        return self.layer(self.dropout(x))


class NoisySGD(torch.optim.SGD):
    """An optimizer whose step drifts with state no seed controls, like a racy GPU kernel.

    The drift comes from a process-wide count of steps, so the two seeded copies differ by
    a fixed, large amount: random noise here could by chance fall under kernel rounding.
    """

    def step(self, closure=None):
        loss = super().step(closure)
        STEPS[0] += 1
        with torch.no_grad():
            for group in self.param_groups:
                for param in group["params"]:
                    param.mul_(1 + 0.05 * STEPS[0])
        return loss


def _run(model, optimizer="sgd"):
    torch.manual_seed(0)
    if optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    elif optimizer == "noisy":
        optimizer = NoisySGD(model.parameters(), lr=0.1)
    return check(model, _batch(), nn.CrossEntropyLoss(), optimizer, select=["TD907"]).by_code(
        "TD907"
    )


@pytest.mark.parametrize("source", ["fresh-numpy", "clock-generator", "global-counter"])
def test_randomness_the_seeds_do_not_control_shows_at_the_first_forward(source) -> None:
    torch.manual_seed(0)
    [found] = _run(Augmented(source))
    assert found.severity is Severity.WARNING
    assert "at the first forward" in found.message
    a, b = found.evidence["first_losses"]
    assert a != b and found.evidence["seed"] == 0


def test_an_update_no_seed_controls_shows_only_after_the_step() -> None:
    torch.manual_seed(0)
    [found] = _run(Augmented("none"), "noisy")
    assert "agree at the first forward" in found.message
    first, second = found.evidence["first_losses"]
    assert first == second
    assert found.severity is Severity.WARNING  # far above kernel rounding
    assert "use_deterministic_algorithms" in found.fix_hint


@pytest.mark.parametrize(
    "source", ["torch", "global-numpy", "random-module", "instance-counter", "none"]
)
def test_randomness_from_seeded_generators_and_copied_state_is_quiet(source) -> None:
    torch.manual_seed(0)
    assert _run(Augmented(source)) == []


def test_without_an_optimizer_a_seeded_model_is_quiet() -> None:
    torch.manual_seed(0)
    assert _run(Augmented("torch"), optimizer=None) == []


def test_the_seeding_leaves_the_global_generators_as_they_were() -> None:
    np.random.seed(123)
    random.seed(123)
    numpy_before, random_before = np.random.get_state(), random.getstate()
    model = Augmented("global-numpy")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch_before = torch.get_rng_state()
    check(model, _batch(), nn.CrossEntropyLoss(), optimizer, select=["TD907"])
    numpy_after = np.random.get_state()
    assert numpy_before[0] == numpy_after[0] and (numpy_before[1] == numpy_after[1]).all()
    assert random.getstate() == random_before
    assert torch.equal(torch.get_rng_state(), torch_before)
