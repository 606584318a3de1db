"""TD208 no gradient, TD211 zero gradient, TD212 non-finite gradient, TD215 vanishing,
TD217 dead ReLU units."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from tests.unit.preflight.helpers import class_batch, classifier, messages, run  # noqa: E402

pytestmark = pytest.mark.needs_torch

FLOW = ("TD208", "TD211", "TD212")


class TwoHeads(nn.Module):
    """A body and two heads; ``mode`` decides how the auxiliary head is (mis)used."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)
        self.aux = nn.Linear(16, 4)
        self.mode = mode

    def forward(self, x):
        hidden = torch.relu(self.body(x))
        if self.mode == "detached":
            return self.head(hidden) + self.aux(hidden).detach()
        if self.mode == "rounded":
            return self.head(torch.round(hidden)) + self.aux(torch.round(hidden))
        if self.mode == "sqrt":
            return self.head(hidden) + torch.sqrt(self.aux(hidden) ** 2)
        return self.head(hidden) + (self.aux(hidden) if self.mode == "both" else 0)


def _flow(mode: str):
    return run(TwoHeads(mode), class_batch(), nn.CrossEntropyLoss(), *FLOW)


# --- TD208 / TD211 / TD212 ---------------------------------------------------------------


def test_module_that_never_runs_is_named() -> None:
    report = _flow("unused")
    found = messages(report, "TD208")
    assert "`aux.weight`, `aux.bias`" in found and "never run in the forward" in found
    assert [f.location.object for f in report.by_code("TD208")] == ["aux"]


def test_detached_module_is_told_apart_from_an_unused_one() -> None:
    found = messages(_flow("detached"), "TD208")
    assert "`aux.weight`" in found and "does not reach the loss" in found


def test_round_gives_exactly_zero_gradients_upstream() -> None:
    report = _flow("rounded")
    assert "`body.weight`, `body.bias`" in messages(report, "TD211")
    assert not report.by_code("TD208")


def test_sqrt_of_zero_gives_nan_gradients_with_a_finite_loss() -> None:
    class ZeroHead(TwoHeads):
        def __init__(self) -> None:
            super().__init__("sqrt")
            nn.init.zeros_(self.aux.weight)
            nn.init.zeros_(self.aux.bias)

    found = messages(run(ZeroHead(), class_batch(), nn.CrossEntropyLoss(), *FLOW), "TD212")
    assert "`aux.weight`" in found and "NaN/Inf gradients" in found


def test_all_parameters_used_is_quiet() -> None:
    assert not _flow("both").codes()


def test_frozen_parameters_are_not_missing_gradients() -> None:
    model = TwoHeads("detached")
    model.aux.requires_grad_(False)
    assert not run(model, class_batch(), nn.CrossEntropyLoss(), *FLOW).codes()


def test_structural_zero_of_a_bias_is_quiet() -> None:
    class Siamese(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = classifier(classes=8)
            self.head = nn.Linear(8, 4)

        def forward(self, x):  # the encoder's last bias cancels in the difference
            return self.head(self.encoder(x) - self.encoder(x.flip(0)))

    assert not run(Siamese(), class_batch(), nn.CrossEntropyLoss(), *FLOW).codes()


def test_bias_before_batchnorm_is_quiet() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    assert not run(model, class_batch(), nn.CrossEntropyLoss(), *FLOW).codes()


def test_nan_loss_is_not_reported_again_as_gradients() -> None:
    model = classifier()
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    assert not run(model, class_batch(), nn.CrossEntropyLoss(), *FLOW).codes()


# --- TD215 -------------------------------------------------------------------------------


def _deep(activation, norm: bool = False, depth: int = 10) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    width = 8
    for _ in range(depth):
        layers += [nn.Linear(width, 32)] + ([nn.BatchNorm1d(32)] if norm else []) + [activation()]
        width = 32
    return nn.Sequential(*layers, nn.Linear(32, 4))


def test_deep_sigmoid_network_vanishes() -> None:
    [found] = run(_deep(nn.Sigmoid), class_batch(), nn.CrossEntropyLoss(), "TD215").by_code("TD215")
    assert found.location.object == "0.weight" and found.evidence["ratio"] < 1e-4
    assert "`20.weight`" in found.message


@pytest.mark.parametrize(
    "cut",
    [
        lambda loss: loss.item(),  # a Python float
        lambda loss: loss.detach(),  # a 0-dim tensor without grad
        lambda loss: torch.tensor(loss.item()),
    ],
    ids=["float", "detached", "rebuilt"],
)
def test_a_loss_without_a_graph_on_a_vanishing_network_does_not_fail(cut) -> None:
    """No gradient reaches any layer: nothing to compare, and no internal error."""
    report = run(
        _deep(nn.Sigmoid),
        class_batch(),
        lambda out, y: cut(nn.functional.cross_entropy(out, y)),
        "TD215",
        "TD605",
    )
    assert not report.by_code("TD001") and not report.by_code("TD215")
    assert "cannot be backpropagated" in messages(report, "TD605")


def test_deep_relu_network_with_batchnorm_is_quiet() -> None:
    report = run(_deep(nn.ReLU, norm=True), class_batch(), nn.CrossEntropyLoss(), "TD215")
    assert not report.by_code("TD215"), messages(report, "TD215")


def test_shallow_sigmoid_network_is_quiet() -> None:
    report = run(_deep(nn.Sigmoid, depth=2), class_batch(), nn.CrossEntropyLoss(), "TD215")
    assert not report.by_code("TD215")


def test_transformer_with_embeddings_is_quiet() -> None:
    from tests.integration.realistic_models import transformer_setup

    model, batch, loss, _ = transformer_setup()
    assert not run(model, batch, loss, "TD215").by_code("TD215")


# --- TD217 -------------------------------------------------------------------------------


def _biased(bias: float) -> nn.Module:
    model = classifier(hidden=64)
    nn.init.constant_(model[0].bias, bias)
    return model


def test_negative_bias_kills_most_units() -> None:
    [found] = run(_biased(-3.0), class_batch(), nn.CrossEntropyLoss(), "TD217").by_code("TD217")
    assert found.location.object == "1" and found.evidence["dead"] >= 32


def test_dead_units_at_several_sites_are_one_finding() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)
    )
    nn.init.constant_(model[0].bias, -3.0)
    nn.init.constant_(model[2].bias, -3.0)
    [found] = run(model, class_batch(), nn.CrossEntropyLoss(), "TD217").by_code("TD217")
    assert found.location.object == "Sequential" and "At 2 ReLU sites" in found.message
    assert set(found.evidence["sites"]) == {"1", "3"}


def test_functional_relu_is_located_at_its_module() -> None:
    class Functional(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = _biased(-3.0)

        def forward(self, x):
            return self.inner[2](torch.relu(self.inner[0](x)))

    report = run(Functional(), class_batch(), nn.CrossEntropyLoss(), "TD217")
    assert [f.location.object for f in report.by_code("TD217")] == ["Functional"]


def test_default_initialisation_is_quiet() -> None:
    assert not run(_biased(0.0), class_batch(), nn.CrossEntropyLoss(), "TD217").by_code("TD217")


def test_a_few_dead_units_are_tolerated() -> None:
    model = _biased(0.0)
    with torch.no_grad():
        model[0].bias[:8] = -50.0  # 8 of 64 units dead: a trained net can have that
    assert not run(model, class_batch(), nn.CrossEntropyLoss(), "TD217").by_code("TD217")


def test_tiny_batches_are_not_judged() -> None:
    inputs, targets = class_batch(size=4)
    report = run(_biased(-3.0), (inputs, targets), nn.CrossEntropyLoss(), "TD217")
    assert not report.by_code("TD217")


def test_zero_initialised_lora_branch_is_quiet() -> None:
    class LoRALinear(nn.Module):
        """A frozen base layer plus a low-rank update whose B starts at zero, as in LoRA."""

        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.base = nn.Linear(8, 4)
            self.base.requires_grad_(False)
            self.lora_a = nn.Parameter(torch.randn(2, 8) * 0.1)
            self.lora_b = nn.Parameter(torch.zeros(4, 2))

        def forward(self, x):
            return self.base(x) + x @ self.lora_a.T @ self.lora_b.T

    assert not run(LoRALinear(), class_batch(), nn.CrossEntropyLoss(), *FLOW).codes()


def test_zero_init_residual_is_quiet_but_round_behind_it_is_not() -> None:
    class Block(nn.Module):
        def __init__(self, rounded: bool) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.inner = nn.Linear(8, 8)
            self.scale = nn.Parameter(torch.zeros(8))  # ReZero-style gate
            self.head = nn.Linear(8, 4)
            self.rounded = rounded

        def forward(self, x):
            inner = self.inner(x)
            inner = torch.round(inner) if self.rounded else inner
            return self.head(x + self.scale * inner)

    assert not run(Block(False), class_batch(), nn.CrossEntropyLoss(), *FLOW).codes()
    assert "`inner.weight`" in messages(
        run(Block(True), class_batch(), nn.CrossEntropyLoss(), *FLOW), "TD211"
    )
