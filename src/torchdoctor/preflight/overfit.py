"""The overfit-one-batch run behind the learning probe (TD605, TD606).

:func:`run_steps` trains a copy on the check's batch until its loss falls clearly (or for
:data:`STEPS` steps) and can measure the first update of every parameter group;
:func:`reference_run` does the same with ``Adam(lr=1e-3)`` on a fresh copy, the second
opinion that separates "this optimizer is too slow" from "this model cannot fit".
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.preflight.describe import peak_learning_rate
from torchdoctor.preflight.training import (
    TrainingCopy,
    copy_for_training,
    is_finite,
    train_step,
    with_optimizer,
)

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = [
    "CLEAR_DROP",
    "PATIENT_STEPS",
    "REFERENCE_RATES",
    "SOME_DROP",
    "STEPS",
    "GroupUpdate",
    "Trajectory",
    "dropped",
    "reference_run",
    "run_steps",
    "use_peak_rates",
]

STEPS = 15
PATIENT_STEPS = 6  # after this many, a steady 2% fall ends the run: the verdict is in
CLEAR_DROP = 0.10  # falling by 10% of its starting value is learning: stop early
SOME_DROP = 0.02  # a slower optimizer that lowers it by 2% is making progress: trusted
# Adam rates of the second opinion, tried in turn: a linear head on frozen features needs
# the larger one to move in a few steps, and most models learn at the smaller.
REFERENCE_RATES = (1e-3, 1e-2)


@dataclass(frozen=True, slots=True)
class GroupUpdate:
    """The first update of one parameter group: ‖Δw‖ / ‖w‖ over its parameters with grads."""

    index: int
    ratio: float
    lr: Any
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Trajectory:
    """Losses before each step (``losses[k]`` follows k updates) and the first update."""

    losses: tuple[float, ...]
    updates: tuple[GroupUpdate, ...] = ()
    moved: bool = True
    optimizer: str = ""  # what trained, for messages: "Adam(lr=0.001)"
    weights_finite: bool = True  # whether every parameter was finite after the last step

    @property
    def initial(self) -> float:
        """The loss before any update."""
        return self.losses[0]

    @property
    def learned(self) -> bool:
        """Whether the mean of the last three losses fell clearly below the first."""
        return dropped(self.losses, CLEAR_DROP)

    @property
    def finite(self) -> bool:
        """Whether every loss was finite."""
        return all(is_finite(loss) for loss in self.losses)


def dropped(losses: tuple[float, ...] | list[float], fraction: float) -> bool:
    """Whether the mean of the last three losses is ``fraction`` below the first."""
    if len(losses) < 4:
        return False
    recent = sum(losses[-3:]) / 3
    return losses[0] - recent >= fraction * abs(losses[0])


def _weights(optimizer: Any) -> list[list[tuple[Any, Any]]]:
    import torch

    with torch.no_grad():
        return [
            [(p, p.detach().clone()) for p in group["params"] if p.requires_grad]
            for group in optimizer.param_groups
        ]


def _updates(
    optimizer: Any, before: list[list[tuple[Any, Any]]], names: dict[int, str]
) -> tuple[GroupUpdate, ...]:
    import torch

    updates = []
    with torch.no_grad():
        for index, (group, pairs) in enumerate(zip(optimizer.param_groups, before, strict=True)):
            pairs = [(p, old) for p, old in pairs if p.grad is not None]
            weight = sum(float(old.double().pow(2).sum()) for _, old in pairs)
            if not pairs or weight == 0.0:
                continue  # nothing trained, or no weight scale to compare with
            delta = sum(float((p.detach() - old).double().pow(2).sum()) for p, old in pairs)
            updates.append(
                GroupUpdate(
                    index,
                    (delta / weight) ** 0.5,
                    group.get("lr"),
                    tuple(names.get(id(p), "?") for p, _ in pairs),
                )
            )
    return tuple(updates)


def run_steps(ctx: CheckContext, training: TrainingCopy, *, measure: bool = False) -> Trajectory:
    """Train ``training`` on the batch until the loss falls clearly (10%, or a steady 2%
    after :data:`PATIENT_STEPS`), turns non-finite, or :data:`STEPS` steps have run.

    With ``measure``, the first update of each group is measured, and the wall time of
    every later step is added to :attr:`CheckContext.step_times` (on the CPU, where the
    clock sees the whole step) for the loader probe."""
    import torch

    names = {id(p): n for n, p in training.model.named_parameters()}
    losses: list[float] = []
    updates: tuple[GroupUpdate, ...] = ()
    timed = measure and ctx.device.type == "cpu"
    for step in range(STEPS):
        before = _weights(training.optimizer) if measure and step == 0 else None
        # One seed for every step: the same dropout masks each time, so the losses
        # measure the updates and not the noise. Seeding is the check's cost, not the
        # step's (torch.manual_seed formats a stack for CUDA's lazy seeding): untimed.
        torch.manual_seed(ctx.seed)
        begin = time.perf_counter()
        losses.append(train_step(training, ctx.batch, None))
        if timed and step > 0:  # the first step allocates the optimizer's state
            ctx.step_times.append(time.perf_counter() - begin)
        if before is not None:
            updates = _updates(training.optimizer, before, names)
        if not is_finite(losses[-1]) or dropped(losses, CLEAR_DROP):
            break
        if len(losses) >= PATIENT_STEPS and dropped(losses, SOME_DROP):
            break
    finite = all(is_finite(loss) for loss in losses) or _finite_weights(training.model)
    return Trajectory(
        tuple(losses), updates, _moved(ctx.model, training.model), weights_finite=finite
    )


def _finite_weights(model: Any) -> bool:
    import torch

    return all(bool(torch.isfinite(p).all()) for p in model.parameters() if p.is_floating_point())


def _moved(original: Any, trained: Any) -> bool:
    """Whether training changed any parameter of the copy."""
    import torch

    before = dict(original.named_parameters())
    return any(
        not torch.equal(p.detach(), before[n].detach())
        for n, p in trained.named_parameters()
        if n in before and p.shape == before[n].shape
    )


def reference_run(ctx: CheckContext) -> Trajectory:
    """The same run with Adam over every trainable parameter of a fresh copy, at each of
    :data:`REFERENCE_RATES` until one makes progress; the best run otherwise."""
    import torch

    best: Trajectory | None = None
    for rate in REFERENCE_RATES:
        training = copy_for_training(ctx, with_optimizer=False)
        params = [p for p in training.model.parameters() if p.requires_grad]
        if isinstance(training.loss_fn, torch.nn.Module) and training.loss_fn is not ctx.loss_fn:
            params += [p for p in training.loss_fn.parameters() if p.requires_grad]
        run = run_steps(ctx, with_optimizer(training, torch.optim.Adam(params, lr=rate)))
        run = dataclasses.replace(run, optimizer=f"Adam(lr={rate:g})")
        if dropped(run.losses, SOME_DROP):
            return run
        # A finite run is the better witness: min() over NaN losses means nothing.
        if best is None or (run.finite and (not best.finite or min(run.losses) < min(best.losses))):
            best = run
    assert best is not None
    return best


def use_peak_rates(optimizer: Any) -> bool:
    """Set every group of a copied optimizer to its schedule's peak rate; whether any moved.

    A warm-up starts at a tiny rate on purpose: the question is whether the model learns
    at the rate the schedule trains with, not during its first steps.
    """
    moved = False
    for group in optimizer.param_groups:
        peak = peak_learning_rate(group)
        current = group.get("lr")
        if peak is None or current is None or not peak > float(current):
            continue
        if hasattr(current, "fill_"):
            current.fill_(peak)
        else:
            group["lr"] = peak
        moved = True
    return moved
