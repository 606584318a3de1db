"""An epoch-based learning-rate scheduler stepped every batch (TD615).

``StepLR``, ``MultiStepLR``, ``ExponentialLR`` and ``CosineAnnealingLR`` count epochs:
their ``step_size``, milestones, ``gamma`` and ``T_max`` are written for one call per
epoch. Called after every ``optimizer.step()`` they decay the learning rate within the
first epoch, and training stalls. The verdict needs all of: such a scheduler on the
optimizer, called about as often as the optimizer stepped, and the learning rate cut to
below 1% of its start within the first few hundred steps (a cosine schedule must also
have run past its period). Per-iteration schedules written for it (a cosine over the
whole run, a slow exponential decay) stay quiet.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import OptimizerInfo, RuntimeDetector, StepEvent
from torchdoctor.static.torchapi import EPOCH_SCHEDULERS

__all__ = ["EpochSchedulerPerBatch", "schedulers_of"]

# Epoch schedulers with a length; ReduceLROnPlateau follows the metric, not the count.
_EPOCH_SCHEDULERS = frozenset(name for name, length in EPOCH_SCHEDULERS.items() if length)
_COLLAPSED = 0.01  # the learning rate below this share of its start
_WITHIN_STEPS = 300  # ... this early in the run
_PER_BATCH = 0.8  # scheduler calls per optimizer step that mean "every batch"
_MIN_STEPS = 10
_COSINE = "CosineAnnealingLR"
# Schedules made to be stepped every batch, whose collapse inside a cycle is their design.
_PER_ITERATION = frozenset({"OneCycleLR", "CyclicLR", "CosineAnnealingWarmRestarts"})
# Schedulers of no known unit (LambdaLR, MultiplicativeLR, a user's own) are judged by
# the trajectory: collapsed within the window and still collapsed this many times later.
_STAYED = 4


def schedulers_of(optimizer: Any) -> list[Any]:
    """The LR schedulers built on ``optimizer`` (found from the objects referring to it;
    for reports only)."""
    import gc

    import torch

    base = (
        getattr(torch.optim.lr_scheduler, "LRScheduler", None)
        or torch.optim.lr_scheduler._LRScheduler
    )
    return [
        obj
        for obj in gc.get_referrers(optimizer)
        if issubclass(type(obj), base) and getattr(obj, "optimizer", None) is optimizer
    ]


@dataclass(slots=True)
class _Suspect:
    """An epoch-type scheduler found on an optimizer when its learning rate collapsed."""

    scheduler: Any  # a weak reference: a scheduler local to a function may be gone
    name: str
    calls: int  # its calls when the learning rate collapsed
    step: int  # the optimizer's step then
    t_max: int | None
    confirmed: bool  # a cosine is confirmed once it runs past its period
    by_trajectory: bool = False  # no known unit: confirmed if the rate stays collapsed


@detector("TD615", depth=Depth.RUN)
class EpochSchedulerPerBatch(RuntimeDetector):
    """Flags an epoch-based scheduler whose decay ran out within the first steps."""

    def __init__(self) -> None:
        self._start: dict[int, float] = {}  # optimizer key -> lr at its first step
        self._suspects: dict[int, list[_Suspect]] = {}
        self._settled: set[int] = set()  # optimizer keys with nothing left to watch

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        if id(optimizer) not in self._settled:
            self.resubscribe("on_step_end")

    def on_step_end(self, event: StepEvent) -> None:
        key = id(event.optimizer)
        suspects = self._suspects.get(key)
        if suspects is not None:
            for suspect in suspects:  # a cosine is judged once it runs past its period
                if suspect.t_max is not None and not suspect.confirmed:
                    alive = suspect.scheduler()
                    suspect.confirmed = alive is not None and int(alive.last_epoch) > int(
                        suspect.t_max
                    )
            if all(suspect.confirmed for suspect in suspects):
                self._settle(key)
            return
        if event.step > _WITHIN_STEPS:
            self._settle(key)  # past the window without a collapse: never judged now
            return
        lr = event.optimizer.optimizer.param_groups[0].get("lr")
        if event.step == 1 and isinstance(lr, (int, float)):
            self._start[key] = float(lr)  # schedulers step after the optimizer: still lr0
        if event.step < _MIN_STEPS or key not in self._start:
            return
        start = self._start[key]
        if isinstance(lr, (int, float)) and start > 0 and lr < _COLLAPSED * start:
            self._suspects[key] = [
                _Suspect(
                    weakref.ref(scheduler),
                    name,
                    calls,
                    event.step,
                    getattr(scheduler, "T_max", None) if name == _COSINE else None,
                    name in _EPOCH_SCHEDULERS and name != _COSINE,
                    name not in _EPOCH_SCHEDULERS,
                )
                for scheduler in schedulers_of(event.optimizer.optimizer)
                if (name := type(scheduler).__name__) not in _PER_ITERATION
                and (calls := int(getattr(scheduler, "last_epoch", 0))) >= _PER_BATCH * event.step
            ]

    def _settle(self, key: int) -> None:
        self._settled.add(key)
        if all(id(info) in self._settled for info in self.monitor.optimizers):
            self.unsubscribe("on_step_end")

    def on_finish(self, report: Any) -> None:
        for info in self.monitor.optimizers:
            confirmed = [
                s
                for s in self._suspects.get(id(info), [])
                if s.confirmed or (s.by_trajectory and self._stayed(info, s))
            ]
            if confirmed:
                first = confirmed[0]
                self._emit(info, first, self.monitor.global_step)

    def _stayed(self, info: Any, suspect: _Suspect) -> bool:
        """Whether the learning rate is still collapsed at the end of a run at least
        :data:`_STAYED` times as long as it took to collapse."""
        lr = info.optimizer.param_groups[0].get("lr")
        start = self._start.get(id(info), 0.0)
        return (
            self.monitor.global_step >= _STAYED * suspect.step
            and isinstance(lr, (int, float))
            and lr < _COLLAPSED * start
        )

    def _emit(self, info: Any, suspect: _Suspect, total: int) -> None:
        name, step, calls = suspect.name, suspect.step, suspect.calls
        start = self._start.get(id(info), 0.0)
        site = self.monitor.optimizer_site(info.optimizer)
        where = f" (optimizer built at {site})" if site is not None else ""
        head = (
            f"`{name}` on {info.label}{where} was stepped {calls} times for {step} optimizer "
            f"steps, once per batch"
        )
        fell = f"the learning rate fell from {start:.3g} to below 1% of it by step {step}"
        if suspect.by_trajectory:
            message = (
                f"{head}: {fell} and stayed there for the remaining {total - step} of "
                f"{total} steps, so training stalls"
            )
        else:
            message = (
                f"{head}, but it counts epochs: {fell}, spending a decay meant for the "
                "whole training in its first batches, so training stalls"
            )
        self.emit(
            finding(
                "TD615",
                message,
                Location(object=f"{name} of {info.label}"),
                Depth.RUN,
                fix_hint="Call `scheduler.step()` once per epoch, after the batch loop; or use a "
                "per-iteration schedule (`OneCycleLR`, `CosineAnnealingLR(T_max=total "
                "steps)`) if you mean to step it every batch.",
                evidence={
                    "scheduler": name,
                    "scheduler_steps": calls,
                    "optimizer_steps": step,
                    "lr_start": start,
                    "collapsed_at_step": step,
                },
            )
        )
