"""TD615 at run: an epoch-based scheduler stepped every batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
sched = torch.optim.lr_scheduler

import torchdoctor  # noqa: E402

Make = Callable[[Any], Any]


def train(
    make_scheduler: Make, *, per_batch: bool, epochs: int = 4, batches: int = 10
) -> torchdoctor.Report:
    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = make_scheduler(optimizer)
    with torchdoctor.watch() as session:
        for _ in range(epochs):
            for _ in range(batches):
                x = torch.randn(16, 6)
                loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if per_batch:
                    scheduler.step()
            if not per_batch:
                scheduler.step()
    return session.report


@pytest.mark.parametrize(
    "make",
    [
        lambda o: sched.StepLR(o, step_size=2, gamma=0.5),
        lambda o: sched.MultiStepLR(o, milestones=[5, 12, 20], gamma=0.1),
        lambda o: sched.ExponentialLR(o, gamma=0.8),
        lambda o: sched.CosineAnnealingLR(o, T_max=8),
    ],
    ids=["step", "multistep", "exponential", "cosine-short-period"],
)
def test_an_epoch_scheduler_stepped_every_batch_is_found(make: Make) -> None:
    [found] = train(make, per_batch=True).by_code("TD615")
    assert found.evidence["collapsed_at_step"] <= 40
    assert "once per epoch" in found.fix_hint


@pytest.mark.parametrize(
    ("make", "per_batch"),
    [
        (lambda o: sched.StepLR(o, step_size=2, gamma=0.5), False),
        (lambda o: sched.ExponentialLR(o, gamma=0.5), False),
        (lambda o: sched.CosineAnnealingLR(o, T_max=40), True),
        (lambda o: sched.OneCycleLR(o, max_lr=0.1, total_steps=40), True),
        (lambda o: sched.ExponentialLR(o, gamma=0.999), True),
        (lambda o: sched.StepLR(o, step_size=30, gamma=0.5), True),
    ],
    ids=[
        "step-per-epoch",
        "exponential-per-epoch",
        "cosine-over-the-run",
        "one-cycle",
        "slow-exponential-per-batch",
        "step-in-iterations",
    ],
)
def test_schedules_that_fit_how_they_are_stepped_are_quiet(make: Make, per_batch: bool) -> None:
    assert not train(make, per_batch=per_batch).by_code("TD615")


# -- schedulers of no known unit: judged by the learning rate's trajectory ------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda o: sched.LambdaLR(o, lambda epoch: 0.9**epoch),
        lambda o: sched.MultiplicativeLR(o, lambda epoch: 0.85),
    ],
    ids=["lambda", "multiplicative"],
)
def test_a_decay_per_epoch_written_as_a_lambda_and_stepped_every_batch_is_found(
    make: Make,
) -> None:
    [found] = train(make, per_batch=True, epochs=10, batches=20).by_code("TD615")
    assert "stayed there" in found.message and "counts epochs" not in found.message


@pytest.mark.parametrize(
    ("make", "per_batch", "epochs"),
    [
        # the same decay stepped once per epoch, as meant
        (lambda o: sched.LambdaLR(o, lambda epoch: 0.9**epoch), False, 8),
        # a per-iteration warm-up and linear decay over the whole run (160 steps)
        (lambda o: sched.LambdaLR(o, lambda s: min((s + 1) / 10, (160 - s) / 150)), True, 8),
        # collapsed early but the run ends soon after: too short to say it stayed there
        (lambda o: sched.LambdaLR(o, lambda s: 0.9**s), True, 4),
        (lambda o: sched.OneCycleLR(o, max_lr=0.1, total_steps=160), True, 8),
    ],
    ids=["lambda-per-epoch", "warmup-decay", "short-run", "one-cycle"],
)
def test_per_iteration_lambdas_and_short_runs_are_quiet(
    make: Make, per_batch: bool, epochs: int
) -> None:
    report = train(make, per_batch=per_batch, epochs=epochs, batches=20)
    assert not report.by_code("TD615")
