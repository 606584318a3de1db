"""Update-to-weight ratios out of band (TD606), and the optimizers that pick their own step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import mlp, step  # noqa: E402

Closure = Callable[[], torch.Tensor]


def train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int) -> torchdoctor.Report:
    with torchdoctor.watch(sample_every=2) as w:
        for _ in range(steps):
            step(model, optimizer)
    return w.report


def curve_fit(
    make_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
    steps: int = 8,
    head_std: float | None = None,
) -> tuple[torchdoctor.Report, list[float]]:
    """Full-batch regression of sin(2x) driven by ``optimizer.step(closure)``."""
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 128).unsqueeze(1)
    y = torch.sin(2 * x)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
    if head_std is not None:  # a near-zero head: any useful step is many times its size
        nn.init.normal_(model[2].weight, std=head_std)
    optimizer = make_optimizer(model)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    with torchdoctor.watch(sample_every=1) as w:
        losses = [optimizer.step(closure).item() for _ in range(steps)]
    return w.report, losses


class BacktrackingSGD(torch.optim.Optimizer):
    """Gradient descent with a backtracking line search: the closure runs several times."""

    def __init__(self, params: object, lr: float) -> None:
        super().__init__(params, {"lr": lr})  # type: ignore[arg-type]

    @torch.no_grad()
    def step(self, closure: Closure | None = None) -> torch.Tensor:  # type: ignore[override]
        assert closure is not None
        with torch.enable_grad():
            start = closure()
        params = [p for group in self.param_groups for p in group["params"]]
        grads = [p.grad.clone() for p in params]
        rate = self.param_groups[0]["lr"]
        for _ in range(20):
            for p, g in zip(params, grads, strict=True):
                p.add_(g, alpha=-rate)
            with torch.enable_grad():
                if closure() < start:
                    break
            for p, g in zip(params, grads, strict=True):
                p.add_(g, alpha=rate)
            rate /= 2
        return start


# -- found -----------------------------------------------------------------------------------


def test_update_larger_than_the_weights_is_found_by_parameter_name() -> None:
    torch.manual_seed(0)
    model = mlp()
    [found] = train(model, torch.optim.SGD(model.parameters(), lr=200.0), 8).by_code("TD606")
    assert found.evidence["update_ratio"] > 1
    assert found.location.object in {"0.weight", "2.weight"}


def test_learning_rate_typo_is_found() -> None:
    torch.manual_seed(0)
    model = mlp()
    [found] = train(model, torch.optim.Adam(model.parameters(), lr=1e-7), 30).by_code("TD606")
    assert "too small" in found.message


def test_lbfgs_overshooting_with_the_loss_rising_is_found_by_parameter_name() -> None:
    report, losses = curve_fit(lambda m: torch.optim.LBFGS(m.parameters(), lr=10.0, max_iter=4))
    assert losses[1] > losses[0]  # the fixture really diverges
    [found] = report.by_code("TD606")
    assert found.location.object.endswith(".weight")
    assert "param[" not in found.message and "loss rose" in found.message


# -- quiet -----------------------------------------------------------------------------------


def test_lbfgs_first_step_larger_than_a_small_layer_is_quiet() -> None:
    report, losses = curve_fit(
        lambda m: torch.optim.LBFGS(
            m.parameters(), lr=1.0, max_iter=20, history_size=10, line_search_fn="strong_wolfe"
        )
    )
    assert losses[-1] < 0.1 * losses[0]
    assert not report.by_code("TD606")


def test_lbfgs_converged_to_tiny_steps_is_quiet() -> None:
    report, losses = curve_fit(
        lambda m: torch.optim.LBFGS(
            m.parameters(), lr=1.0, max_iter=20, line_search_fn="strong_wolfe"
        ),
        steps=20,
    )
    assert losses[-1] < 0.1 * losses[0]
    assert not report.by_code("TD606")


def test_any_line_search_optimizer_is_judged_by_the_loss() -> None:
    # First steps many times the near-zero head's size, accepted by the line search
    # because the loss fell: not a learning rate to lower.
    report, losses = curve_fit(lambda m: BacktrackingSGD(m.parameters(), lr=10.0), head_std=1e-4)
    assert losses[-1] < losses[0]
    assert not report.by_code("TD606")


# -- judged by outcome: large steps of a run that learns -------------------------------------


class LocalLayer(nn.Linear):
    """A forward-forward layer: its own optimizer and a loss of its own activations."""

    def __init__(self, n_in: int, n_out: int, lr: float) -> None:
        super().__init__(n_in, n_out)
        nn.init.normal_(self.weight, std=1e-3)  # tiny weights: Adam's first steps dwarf them
        self.opt = torch.optim.Adam(self.parameters(), lr=lr)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return torch.relu(torch.mm(x, self.weight.T) + self.bias.unsqueeze(0))

    def fit(self, pos: torch.Tensor, neg: torch.Tensor, epochs: int) -> tuple[Any, Any]:
        for _ in range(epochs):
            goodness = torch.cat(
                [2.0 - self.forward(pos).pow(2).mean(1), self.forward(neg).pow(2).mean(1) - 2.0]
            )
            loss = torch.log1p(torch.exp(goodness)).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(pos).detach(), self.forward(neg).detach()


def forward_forward(lr: float) -> torchdoctor.Report:
    torch.manual_seed(0)
    prototypes = torch.rand(4, 24)
    labels = torch.randint(0, 4, (64,))
    pos = prototypes[labels] + 0.1 * torch.rand(64, 24)
    neg = prototypes[(labels + 1) % 4] + 0.1 * torch.rand(64, 24)
    layers = [LocalLayer(24, 16, lr), LocalLayer(16, 16, lr)]  # a plain list: no model
    with torchdoctor.watch(sample_every=1) as w:
        for layer in layers:
            pos, neg = layer.fit(pos, neg, 40)
    return w.report


def test_forward_forward_layers_with_large_steps_that_learn_are_quiet() -> None:
    report = forward_forward(lr=0.03)  # steps of 30x the weights at first, yet it learns
    assert not report.by_code("TD606")


def test_forward_forward_layers_whose_loss_does_not_fall_are_named_by_their_module() -> None:
    [found] = forward_forward(lr=1.0).by_code("TD606")
    assert found.location.object in {"LocalLayer.weight", "LocalLayer.bias"}
    assert "param[" not in found.message


def test_a_parameter_group_is_named_when_the_optimizer_has_several() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 200.0}], lr=0.01
    )
    [found] = train(model, optimizer, 8).by_code("TD606")
    assert found.location.object == "2.weight" and "(parameter group 1)" in found.message
