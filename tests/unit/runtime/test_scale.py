"""Vanishing (TD215) and exploding (TD216) gradients (TD606 is in test_updates.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp, step  # noqa: E402

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
    assert found.evidence["update_share"] < 1e-3
    assert "`0.weight`" in found.message and "relative update" in found.message
    # The root cause is reported once: no "lr too small" and no "parameters never change".
    assert not report.by_code("TD606") and not report.by_code("TD218")


class ScaledBranch(nn.Module):
    """A branch added to the main path through a fixed scale of 1e-5 (a frozen layer scale):
    its weights get gradients about 1e-5 times those of the head at every step."""

    def __init__(self, scale: float = 1e-5) -> None:
        super().__init__()
        self.branch = nn.Linear(8, 32)
        self.skip = nn.Linear(8, 32)
        self.mid = nn.Linear(32, 32)
        self.head = nn.Linear(32, 3)
        self.register_buffer("scale", torch.tensor(scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.skip(x) + self.scale * self.branch(x))
        return self.head(torch.relu(self.mid(hidden)))


def test_vanishing_gradients_that_keep_the_early_layers_still_under_adam() -> None:
    """Adam's epsilon swallows gradients of 1e-8: the earliest layers lag the latest by a
    hundredfold, and the loss does not improve."""
    torch.manual_seed(0)
    model = deep_sigmoid()
    [found] = train(model, torch.optim.Adam(model.parameters(), lr=1e-3), 40).by_code("TD215")
    assert found.evidence["update_share"] < 0.05
    assert found.evidence["loss_falls"] is False
    assert "the loss does not improve" in found.message


def test_branch_scaled_to_nothing_never_learns_with_sgd_even_as_the_loss_falls() -> None:
    torch.manual_seed(0)
    model = ScaledBranch()
    [found] = train(model, torch.optim.SGD(model.parameters(), lr=0.1), 40).by_code("TD215")
    assert found.evidence["earliest"] == "branch.weight"
    assert found.evidence["update_share"] < 1e-3  # negligible: flagged whatever the loss


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


def test_tiny_gradients_with_adam_sized_updates_are_not_vanishing() -> None:
    """The same persistent gradient ratio (about 1e-5) as under SGD above, but AdamW moves
    the branch as much as the head: the tiny gradients do not keep it from learning (the
    query/key weights of a freshly initialised transformer are this case)."""
    torch.manual_seed(0)
    model = ScaledBranch()
    x, y = batch()
    nn.functional.cross_entropy(model(x), y).backward()
    rms = {n: float(p.grad.norm()) / p.numel() ** 0.5 for n, p in model.named_parameters()}
    assert rms["branch.weight"] < 1e-4 * rms["head.weight"]  # the symptom is there
    model.zero_grad()
    assert not train(model, torch.optim.AdamW(model.parameters(), lr=1e-3), 40).codes() & CODES


def test_gradients_that_vanish_only_for_a_while_are_quiet() -> None:
    """The branch's scale is raised to 1 after a warm-up: the symptom does not persist."""
    torch.manual_seed(0)
    model = ScaledBranch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch(sample_every=2) as w:
        for index in range(40):
            if index == 30:
                model.scale.fill_(1.0)
            step(model, optimizer)
    assert not w.report.by_code("TD215")


class Product(nn.Module):
    """``a * b * x`` from a = b = 0.01 towards a product of 100: the gradients grow a
    thousandfold as the factors grow, while the loss falls."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.tensor(0.01))
        self.b = nn.Parameter(torch.tensor(0.01))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a * self.b * x


def test_gradients_growing_while_the_loss_clearly_falls_are_not_an_explosion() -> None:
    model = Product()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.ones(32)
    grad_norms, losses = [], []
    with torchdoctor.watch(sample_every=2) as w:
        for _ in range(40):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), 100 * x)
            loss.backward()
            grad_norms.append(float(model.a.grad.abs()))
            losses.append(loss.item())
            optimizer.step()
    assert grad_norms[-1] > 100 * grad_norms[0] and losses[-1] < 0.5 * losses[0]
    assert not w.report.by_code("TD216")
