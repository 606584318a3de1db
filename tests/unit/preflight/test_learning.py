"""Can it learn: the overfit-one-batch test (TD605) and the first update's size (TD606)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402

pytestmark = pytest.mark.needs_torch

CODES = ["TD605", "TD606"]


def _batch(classes: int = 4) -> tuple:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(32, 10, generator=generator), torch.arange(32) % classes


def _mlp(dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 4))


def _findings(model, optimizer, loss_fn=None, batch=None):
    report = check(
        model, batch or _batch(), loss_fn or nn.CrossEntropyLoss(), optimizer, select=CODES
    )
    return report.by_code("TD605"), report.by_code("TD606")


# --- TD605: positive ---------------------------------------------------------------------------


def test_a_loss_rebuilt_from_its_value_has_no_gradient() -> None:
    model = _mlp()

    def loss_fn(output, target):
        return torch.tensor(F.cross_entropy(output, target).item(), requires_grad=True)

    [found], _ = _findings(model, torch.optim.Adam(model.parameters()), loss_fn)
    assert found.severity is Severity.ERROR
    assert "no parameter received a gradient" in found.message
    assert found.evidence["parameters_with_gradient"] == 0


def test_a_step_function_in_the_path_gives_zero_gradients_and_says_where_to_look() -> None:
    class Rounded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _mlp()

        def forward(self, x):
            return torch.round(self.body(x))  # "snap to the nearest integer score"

    model = Rounded()
    [found], _ = _findings(model, torch.optim.Adam(model.parameters()))
    assert "every gradient is exactly zero" in found.message
    assert "`round`" in found.fix_hint


def test_a_zero_learning_rate_changes_nothing_and_says_so() -> None:
    model = _mlp(dropout=0.2)  # the loss still varies with dropout; the weights do not
    [found], _ = _findings(model, torch.optim.SGD(model.parameters(), lr=0.0))
    assert "changed no parameter" in found.message
    assert "the learning rate is 0" in found.message


def test_an_optimizer_over_another_model_changes_nothing_and_says_so() -> None:
    model = _mlp()
    other = nn.Sequential(nn.Linear(3, 5))  # not a copy: nothing of the model's shapes
    [found], _ = _findings(model, torch.optim.Adam(other.parameters()))
    assert "holds none of the parameters that receive gradients" in found.message


def test_an_optimizer_over_a_copy_leaves_the_cause_to_td620() -> None:
    model = _mlp()
    found, _ = _findings(model, torch.optim.Adam(_mlp().parameters()))
    assert not found


def test_a_summed_loss_with_sgd_blows_up_and_the_first_update_is_far_too_large() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 10))
    inputs = _batch()[0]

    def summed(output, target):
        return F.mse_loss(output, target, reduction="sum") * 100

    [learning], [update] = _findings(
        model, torch.optim.SGD(model.parameters(), lr=0.01), summed, (inputs, inputs)
    )
    assert "far too large" in learning.message or "overshoot" in learning.message
    assert update.evidence["update_ratio"] > 1.0
    assert update.location.object == "optimizer.param_groups[0]"
    assert "reduction='sum'" in update.fix_hint


def test_outputs_squashed_to_nothing_cannot_fit_even_with_adam() -> None:
    class Squashed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _mlp()

        def forward(self, x):
            return torch.tanh(self.body(x)) * 1e-3  # a temperature typo: logits near 0

    model = Squashed()
    [found], _ = _findings(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    assert found.severity is Severity.ERROR
    assert "cannot fit the one batch" in found.message
    assert found.evidence["reference_last_loss"] > 0.98 * found.evidence["reference_first_loss"]


def test_a_model_whose_gradients_vanish_is_told_so_not_that_it_is_miswired() -> None:
    torch.manual_seed(0)
    layers = [nn.Linear(10, 64), nn.Sigmoid()]
    for _ in range(10):
        layers += [nn.Linear(64, 64), nn.Sigmoid()]
    model = nn.Sequential(*layers, nn.Linear(64, 4))
    [found], _ = _findings(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    assert "gradients vanish" in found.message and "TD215" in found.message
    assert "wired" not in found.message and "TD215" in found.fix_hint


def test_a_loss_cut_off_from_the_model_is_one_finding_not_one_per_parameter() -> None:
    model = _mlp()

    def rebuilt(output, target):  # a leaf made from the value: backward reaches nothing
        return F.cross_entropy(output, target).detach().requires_grad_()

    report = check(
        model, _batch(), rebuilt, torch.optim.Adam(model.parameters()), select=["TD208", *CODES]
    )
    assert report.codes() == {"TD605"}
    assert "no parameter received a gradient" in report.findings[0].message


def test_a_learning_rate_far_too_small_is_information_with_the_evidence() -> None:
    model = _mlp()
    [found], _ = _findings(model, torch.optim.SGD(model.parameters(), lr=1e-5))
    assert found.severity is Severity.INFO
    assert "barely moves the loss" in found.message and "Adam(lr=0.001)" in found.message
    assert found.evidence["reference_min_loss"] < found.evidence["optimizer_min_loss"]


# --- TD605: negative ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.Adam(p, lr=1e-3),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: torch.optim.AdamW(p, lr=3e-4, weight_decay=0.01),
    ],
    ids=["adam", "sgd-momentum", "adamw"],
)
def test_healthy_setups_with_dropout_are_quiet(make) -> None:
    model = _mlp(dropout=0.3)
    learning, update = _findings(model, make(model.parameters()))
    assert learning == [] and update == []


def test_a_warm_up_from_zero_is_judged_at_its_peak_rate() -> None:
    model = _mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, step / 1000))
    assert optimizer.param_groups[0]["lr"] == 0.0
    assert _findings(model, optimizer) == ([], [])


def test_without_an_optimizer_a_learnable_model_is_quiet() -> None:
    assert _findings(_mlp(), None) == ([], [])


def test_a_linear_head_on_frozen_features_is_not_an_error() -> None:
    model = _mlp()
    model[0].requires_grad_(False)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    learning, update = _findings(model, optimizer)
    assert all(f.severity is Severity.INFO for f in learning) and update == []


def test_a_loss_that_starts_at_zero_is_not_asked_to_fall() -> None:
    model = _mlp()
    inputs = _batch()[0]
    with torch.no_grad():
        targets = model(inputs)
    learning, _ = _findings(
        model, torch.optim.Adam(model.parameters()), nn.MSELoss(), (inputs, targets)
    )
    assert learning == []


def test_a_loss_that_is_already_nan_is_left_to_the_non_finite_rules() -> None:
    model = _mlp()
    inputs, targets = _batch()
    inputs[0, 0] = float("nan")
    learning, update = _findings(
        model, torch.optim.Adam(model.parameters()), batch=(inputs, targets)
    )
    assert learning == [] and update == []


def _log_of_a_shrinking_output():
    """A loss that falls slowly and turns NaN once the output crosses 0 (log of < 0)."""
    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.fill_(0.004)
    return model, (torch.ones(8, 1), torch.zeros(8)), lambda out, y: out.log().mean() + 100


@pytest.mark.parametrize("slow_optimizer", [False, True])
def test_a_reference_run_that_turns_nan_is_that_problem_not_cannot_fit(slow_optimizer) -> None:
    model, batch, loss_fn = _log_of_a_shrinking_output()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-10) if slow_optimizer else None
    learning, _ = _findings(model, optimizer, loss_fn, batch)
    [found] = learning
    assert "cannot fit" not in found.message and "nan" in found.message, found.message
    assert "the loss produces NaN/Inf" in found.message


def test_a_nan_second_opinion_never_reads_as_cannot_fit() -> None:
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.overfit import Trajectory
    from torchdoctor.preflight.probes.learning import _second_opinion_failed

    ctx = CheckContext(_mlp(), _batch(), nn.CrossEntropyLoss())
    reference = Trajectory((1.4, 1.39, float("inf")), optimizer="Adam(lr=0.001)")
    found = _second_opinion_failed(ctx, None, reference)
    assert "cannot fit" not in found.message and "inf" in found.message


def test_a_fully_frozen_model_is_not_a_learning_problem() -> None:
    model = _mlp().requires_grad_(False)
    assert _findings(model, None) == ([], [])


# --- TD606: negative ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.AdamW(p, lr=1e-5),  # fine-tuning
        lambda p: torch.optim.SGD(p, lr=1e-3),  # slow, plain SGD
        lambda p: torch.optim.Adam(p, lr=1e-2),
    ],
    ids=["adamw-1e-5", "sgd-1e-3", "adam-1e-2"],
)
def test_update_ratios_of_slow_and_fast_healthy_rates_are_in_band(make) -> None:
    model = _mlp()
    _, update = _findings(model, make(model.parameters()))
    assert update == []


def test_a_group_of_zero_initialised_biases_has_no_scale_and_is_skipped() -> None:
    model = _mlp()
    for layer in (model[0], model[3]):
        nn.init.zeros_(layer.bias)
    optimizer = torch.optim.SGD(
        [
            {"params": [model[0].weight, model[3].weight]},
            {"params": [model[0].bias, model[3].bias], "lr": 1.0},
        ],
        lr=0.1,
    )
    _, update = _findings(model, optimizer)
    assert update == []


# --- TD606: positive ---------------------------------------------------------------------------


def test_a_group_whose_updates_are_vanishingly_small_is_named() -> None:
    model = _mlp()
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters(), "lr": 1e-9}, {"params": model[3].parameters()}], lr=0.1
    )
    _, [update] = _findings(model, optimizer)
    assert update.location.object == "optimizer.param_groups[0]"
    assert update.evidence["update_ratio"] < 1e-7
    assert "0 (weight, bias)" in update.message
    assert update.fix_hint.startswith("Raise this group's learning rate (lr=1e-09)")


# --- the user's objects ------------------------------------------------------------------------


def test_training_copies_leaves_model_optimizer_and_loss_module_untouched() -> None:
    class LearnedTemperature(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.temperature = nn.Parameter(torch.ones(()))

        def forward(self, output, target):
            return F.cross_entropy(output / self.temperature, target)

    model, loss_fn = _mlp(), LearnedTemperature()
    optimizer = torch.optim.Adam([*model.parameters(), *loss_fn.parameters()], lr=1e-3)
    before = [p.detach().clone() for p in (*model.parameters(), *loss_fn.parameters())]
    check(model, _batch(), loss_fn, optimizer, select=CODES)
    after = [p.detach() for p in (*model.parameters(), *loss_fn.parameters())]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert loss_fn.temperature.grad is None
    assert optimizer.state == {} or all(not s for s in optimizer.state.values())


# --- TD605: a loss that is or turns non-finite --------------------------------------------------


def test_nan_inputs_that_the_loss_hides_are_left_to_td401() -> None:
    """The first loss is finite (the loss leaves out the NaN example) but the gradients are
    NaN and the first step ruins the weights: the data is the problem, not the step size."""
    model = _mlp()
    inputs, targets = _batch()
    inputs[3, 2] = float("nan")
    kept = torch.arange(32) != 3
    report = check(
        model,
        (inputs, targets),
        lambda out, y: F.cross_entropy(out[kept], y[kept]),
        torch.optim.Adam(model.parameters()),
        select=["TD401", *CODES],
    )
    assert report.codes() == {"TD401"}, [f.message for f in report.findings]


def test_nan_gradients_from_a_finite_loss_are_left_to_td212() -> None:
    class Distance(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.encoder = nn.Linear(10, 8)

        def forward(self, first, second):  # sqrt at 0: an infinite slope
            return torch.sqrt(((self.encoder(first) - self.encoder(second)) ** 2).sum(1))

    inputs = _batch()[0]
    second = inputs.clone()
    second[1::2] += 1.0  # half the pairs identical: distance exactly 0
    model = Distance()
    report = check(
        model,
        (inputs, second, torch.ones(32)),
        lambda d, y: (d * y).mean(),
        torch.optim.Adam(model.parameters()),
        select=["TD212", *CODES],
    )
    assert report.codes() == {"TD212"}, [f.message for f in report.findings]


def _trajectory(losses, ratio, weights_finite):
    from torchdoctor.preflight.overfit import GroupUpdate, Trajectory

    return Trajectory(
        tuple(losses), (GroupUpdate(0, ratio, 0.1, ("w",)),), weights_finite=weights_finite
    )


@pytest.mark.parametrize(
    "losses, ratio, weights_finite, reason",
    [
        ([1.0, 40.0, float("nan")], 3.0, False, "far too large (the first changed the weights"),
        ([1.0, 1.5, 9.0, float("inf")], 0.01, False, "far too large (the loss rose first)"),
        ([1.0, 0.99, 0.98, float("nan")], 0.01, False, "a gradient turned NaN/Inf"),
        ([1.0, 0.99, float("nan")], 0.01, True, "the forward or the loss produces NaN/Inf"),
    ],
)
def test_a_loss_that_turns_non_finite_is_given_its_measured_cause(
    losses, ratio, weights_finite, reason
) -> None:
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.probes.learning import _turned_non_finite

    ctx = CheckContext(_mlp(), _batch(), nn.CrossEntropyLoss())
    found = _turned_non_finite(ctx, _trajectory(losses, ratio, weights_finite), "SGD(lr=0.1)")
    assert found.code == "TD605" and reason in found.message, found.message
    assert ("updates are far too large" in found.message) == ("far too large" in reason)
