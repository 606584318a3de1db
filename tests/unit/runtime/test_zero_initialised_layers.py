"""A layer initialised to zero on purpose is not an exploding update (TD606).

Its weights start at 0 and stay as small as the steps that move them while the rest of
the model learns (a spatial transformer's localisation head, the last layer of a
residual branch): a step "as large as the weights" means nothing until the weights have
a size of their own, so update ratios are taken against torch's default initialisation
norm when the weights are smaller than that.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from torchdoctor.runtime.stats import default_init_norm  # noqa: E402


def noisy_head(zero_init: bool, lr: float = 0.5, steps: int = 60) -> torchdoctor.Report:
    """Regression on pure noise: the best head is zero, so its weights hover near 0."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
    if zero_init:
        nn.init.zeros_(model[2].weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(steps):
            x, y = torch.randn(16, 8), torch.randn(16, 4)
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    return session.report


def test_a_zero_initialised_head_hovering_near_zero_is_quiet() -> None:
    assert not noisy_head(zero_init=True).by_code("TD606")


def test_the_same_head_initialised_by_default_is_quiet() -> None:
    assert not noisy_head(zero_init=False).by_code("TD606")


def test_steps_larger_than_a_default_initialised_layer_are_still_found() -> None:
    assert noisy_head(zero_init=True, lr=200.0, steps=12).by_code("TD606")


def test_default_init_norm_matches_torchs_default_linear_initialisation() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(300, 200)
    expected = default_init_norm(layer.weight, layer.weight)
    assert math.isclose(layer.weight.norm().item(), expected, rel_tol=0.02)
    assert default_init_norm(layer.bias, layer.bias) == 0.0
