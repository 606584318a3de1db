"""The optimizer probes: missing (TD601), frozen (TD602) and repeated (TD603) parameters,
and learning rates out of range (TD604)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402

pytestmark = pytest.mark.needs_torch

BATCH = (torch.randn(16, 4, generator=torch.Generator().manual_seed(1)), torch.arange(16) % 3)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.body(x))


def _net() -> Net:
    torch.manual_seed(0)
    return Net()


def _run_both(model, optimizer):
    """TD601 and TD620 together: one of them explains a parameter the optimizer misses."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check(model, BATCH, nn.CrossEntropyLoss(), optimizer, select=["TD601", "TD620"])
    return list(report.findings)


def _run(model, optimizer, code, loss_fn=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about duplicates; we report them
        report = check(model, BATCH, loss_fn or nn.CrossEntropyLoss(), optimizer, select=[code])
    return report.by_code(code)


# --- TD601 -----------------------------------------------------------------------------------


def test_a_head_replaced_after_the_optimizer_is_named_with_its_parameters() -> None:
    model = _net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.head = nn.Linear(8, 3)  # the optimizer keeps the old head: TD620, not TD601
    assert not _run(model, optimizer, "TD601")
    [found] = _run(model, optimizer, "TD620")
    assert found.location.object == "head"
    assert "head (weight, bias)" in found.message
    assert found.evidence["parameters"] == ["head.weight", "head.bias"]
    assert found.severity is Severity.ERROR


def test_a_head_replaced_by_one_of_another_size_is_missing_from_the_optimizer() -> None:
    model = _net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.head = nn.Linear(8, 5)  # no copy of its shape in the optimizer
    [found] = _run_both(model, optimizer)
    assert found.code == "TD601" and found.location.object == "head"


def test_an_optimizer_built_for_another_copy_is_reported_once_for_the_whole_model() -> None:
    model = _net()
    [found] = _run_both(model, torch.optim.Adam(_net().parameters()))
    assert found.code == "TD620" and found.location.object == "Net"
    assert "have the shapes of 4 of them" in found.message


def test_an_optimizer_of_another_architecture_is_missing_every_parameter() -> None:
    model = _net()
    other = nn.Sequential(nn.Linear(3, 7))
    [found] = _run_both(model, torch.optim.Adam(other.parameters()))
    assert found.code == "TD601" and "none of the 4 trainable parameters" in found.message


def test_parameters_missing_from_several_modules_are_one_finding_at_their_parent() -> None:
    """The demo's mistake (an optimizer over the head only) is one problem: one finding."""

    class Small(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.features = nn.Sequential(
                nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 8), nn.LayerNorm(8)
            )
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.features(x))

    model = Small()
    [found] = _run(model, torch.optim.SGD(model.head.parameters(), lr=0.1), "TD601")
    assert found.location.object == "features"
    assert "8 trainable parameter(s) in 4 modules" in found.message
    assert "features.0 (weight, bias), features.1 (weight, bias)" in found.message
    assert found.evidence["modules"] == ["features.0", "features.1", "features.3", "features.4"]


def test_a_trainable_loss_module_outside_the_optimizer_is_reported() -> None:
    class Weighted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(()))

        def forward(self, output, target):
            return nn.functional.cross_entropy(output * self.scale, target)

    model = _net()
    [found] = _run(model, torch.optim.SGD(model.parameters(), lr=0.1), "TD601", Weighted())
    assert found.evidence["parameters"] == ["loss_fn.scale"]


def test_all_parameters_in_the_optimizer_is_quiet() -> None:
    model = _net()
    assert _run(model, torch.optim.SGD(model.parameters(), lr=0.1), "TD601") == []


def test_frozen_parameters_left_out_of_the_optimizer_are_not_missing() -> None:
    model = _net()
    model.body.requires_grad_(False)
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
    assert _run(model, optimizer, "TD601") == []


def test_tied_weights_held_once_are_not_missing() -> None:
    model = nn.Sequential(nn.Embedding(10, 6), nn.Linear(6, 10, bias=False))
    model[1].weight = model[0].weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    report = check(
        model,
        (torch.arange(8), torch.arange(8)),
        nn.CrossEntropyLoss(),
        optimizer,
        select=["TD601", "TD603"],
    )
    assert report.findings == []


# --- TD602 -----------------------------------------------------------------------------------


def test_a_frozen_backbone_inside_the_optimizer_is_information() -> None:
    model = _net()
    model.body.requires_grad_(False)
    [found] = _run(model, torch.optim.AdamW(model.parameters()), "TD602")
    assert found.severity is Severity.INFO
    assert found.location.object == "body.0"
    assert found.evidence["frozen"] == 2


def test_a_frozen_parameter_that_still_holds_a_grad_is_a_warning() -> None:
    model = _net()
    nn.functional.cross_entropy(model(BATCH[0]), BATCH[1]).backward()
    model.body.requires_grad_(False)  # frozen after some training: .grad stays
    [found] = _run(model, torch.optim.AdamW(model.parameters()), "TD602")
    assert found.severity is Severity.WARNING
    assert "weight decay and momentum keep changing them" in found.message


def test_only_trainable_parameters_in_the_optimizer_is_quiet() -> None:
    model = _net()
    model.body.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    assert _run(model, optimizer, "TD602") == []


# --- TD603 -----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:optimizer contains a parameter group with duplicate")
def test_a_module_listed_twice_in_one_group_is_one_finding() -> None:
    model = _net()
    params = list(model.parameters()) + list(model.head.parameters())
    [found] = _run(model, torch.optim.SGD(params, lr=0.1), "TD603")
    assert found.location.object == "head"
    assert "2 times in param_groups[0]" in found.message
    assert found.evidence["parameters"] == ["head.weight", "head.bias"]


def test_a_repeat_across_groups_added_behind_torchs_back_is_found() -> None:
    model = _net()
    optimizer = torch.optim.SGD(
        [{"params": model.body.parameters()}, {"params": model.head.parameters()}], lr=0.1
    )
    optimizer.param_groups[0]["params"].append(model.head.weight)  # bypasses the check
    [found] = _run(model, optimizer, "TD603")
    assert found.location.object == "head.weight"
    assert "param_groups[0], param_groups[1]" in found.message


def test_disjoint_groups_with_their_own_settings_are_quiet() -> None:
    model = _net()
    optimizer = torch.optim.SGD(
        [{"params": model.body.parameters(), "lr": 0.01}, {"params": model.head.parameters()}],
        lr=0.1,
    )
    assert _run(model, optimizer, "TD603") == []


# --- TD604 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "side"),
    [
        (lambda p: torch.optim.Adam(p, lr=0.1), "above"),
        (lambda p: torch.optim.SGD(p, lr=50.0), "above"),
        (lambda p: torch.optim.AdamW(p, lr=1e-9), "below"),
    ],
    ids=["adam-0.1", "sgd-50", "adamw-1e-9"],
)
def test_a_rate_far_outside_the_family_band_is_reported(make, side) -> None:
    model = _net()
    [found] = _run(model, make(model.parameters()), "TD604")
    assert f"far {side}" in found.message
    assert found.location.object == "optimizer.param_groups[0]"
    assert found.severity is Severity.WARNING


def test_a_zero_rate_without_a_scheduler_is_reported() -> None:
    model = _net()
    [found] = _run(model, torch.optim.SGD(model.parameters(), lr=0.0), "TD604")
    assert "no parameter will ever change" in found.message


def test_one_zero_group_beside_training_groups_is_information() -> None:
    model = _net()
    optimizer = torch.optim.SGD(
        [{"params": model.body.parameters(), "lr": 0.0}, {"params": model.head.parameters()}],
        lr=0.1,
    )
    [found] = _run(model, optimizer, "TD604")
    assert found.severity is Severity.INFO
    assert found.location.object == "optimizer.param_groups[0]"


@pytest.mark.parametrize(
    "schedule",
    [
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda epoch: min(1.0, epoch / 100)),
        lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=1e-4, total_iters=100),
        lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.01, total_steps=100),
    ],
    ids=["lambda-from-zero", "linear-from-1e-4", "one-cycle"],
)
def test_a_warm_up_that_starts_at_zero_or_tiny_is_quiet(schedule) -> None:
    model = _net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    schedule(optimizer)
    assert _run(model, optimizer, "TD604") == []


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: torch.optim.SGD(p, lr=3.2, momentum=0.9),  # large-batch linear scaling
        lambda p: torch.optim.Adam(p, lr=1e-3),
        lambda p: torch.optim.AdamW(p, lr=2e-6),  # fine-tuning
        lambda p: torch.optim.RMSprop(p, lr=1e-3),
        lambda p: torch.optim.Adagrad(p, lr=0.01),
        lambda p: torch.optim.Adadelta(p),
        lambda p: torch.optim.Rprop(p, lr=5.0),  # no band: only zero and negative count
    ],
    ids=[
        "sgd",
        "sgd-large-batch",
        "adam",
        "adamw-fine-tune",
        "rmsprop",
        "adagrad",
        "adadelta",
        "rprop",
    ],
)
def test_usual_rates_of_every_family_are_quiet(make) -> None:
    model = _net()
    assert _run(model, make(model.parameters()), "TD604") == []


def test_a_negative_rate_set_after_construction_is_reported() -> None:
    model = _net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer.param_groups[0]["lr"] = -1e-3
    [found] = _run(model, optimizer, "TD604")
    assert "not a usable learning rate" in found.message


def test_no_optimizer_means_no_optimizer_findings() -> None:
    report = check(
        _net(), BATCH, nn.CrossEntropyLoss(), select=["TD601", "TD602", "TD603", "TD604"]
    )
    assert report.findings == []
