"""A learning-rate warm-up that never ends (TD619).

A warm-up (``LinearLR``, a ``LambdaLR`` such as ``min(1, step / warmup)``, the first part
of a ``SequentialLR``) raises the learning rate towards the optimizer's base rate. When its
length is larger than the training (a warm-up written in samples or epochs while the
scheduler is stepped per batch the other way round, a ``total_iters`` meant for a longer
run), the whole run trains with a learning rate that is still climbing and never reaches
the rate that was chosen. The verdict needs all of: a run that ended by itself (not at
``--max-steps``, not by an exception), at least 500 steps of the optimizer, a warm-up
scheduler on it, a learning rate that rose at every one of the last 20% of its steps, and a
highest learning rate still below 95% of the scheduler's base rate. The cost is one float
per optimizer step.
"""

from __future__ import annotations

import weakref
from array import array
from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.schedules import schedulers_of

__all__ = ["WarmupNeverEnds", "still_warming"]

MIN_STEPS = 500
_LOOKUP_STEP = MIN_STEPS // 2  # the optimizer step at which its schedulers are looked up
_TAIL = 0.2  # the share of the last steps over which the rate must rise at every step
_REACHED = 0.95  # a rate at this share of the base one has reached it
_WARMUPS = frozenset(
    {"LambdaLR", "LinearLR", "SequentialLR", "MultiplicativeLR", "ChainedScheduler"}
)


@dataclass(slots=True)
class _Warmup:
    """A warm-up scheduler of an optimizer, read while it was alive."""

    scheduler: Any  # a weak reference: a scheduler local to a function may be gone
    name: str
    base: float
    length: int | None
    calls: int = 0


def still_warming(lrs: Any, base: float) -> bool:
    """Whether a run's learning rates (one per optimizer step) rose at every one of the
    last 20% of the steps and never came within 5% of ``base``."""
    count = len(lrs)
    if count < MIN_STEPS or base <= 0:
        return False
    start = count - max(2, int(count * _TAIL))
    tail = lrs[start:]
    rising = all(later > earlier for earlier, later in zip(tail, tail[1:], strict=False))
    return rising and max(lrs) < _REACHED * base


def _length(scheduler: Any) -> int | None:
    """The warm-up's own length in scheduler steps, when the scheduler states it."""
    name = type(scheduler).__name__
    if name == "LinearLR":
        return int(scheduler.total_iters)
    if name == "SequentialLR":
        milestones = getattr(scheduler, "_milestones", None)
        if milestones:
            return int(milestones[0])
    return None


@detector("TD619", depth=Depth.RUN)
class WarmupNeverEnds(RuntimeDetector):
    """Flags a warm-up schedule whose learning rate is still rising when the run ends."""

    def __init__(self) -> None:
        self._lrs: dict[int, array[float]] = {}
        self._warmups: dict[int, list[_Warmup]] = {}
        self._failed = False

    def on_step_end(self, event: StepEvent) -> None:
        key = id(event.optimizer)
        lr = event.optimizer.optimizer.param_groups[0].get("lr")
        if isinstance(lr, (int, float)):
            lrs = self._lrs.get(key)
            if lrs is None:
                lrs = self._lrs[key] = array("d")
            lrs.append(float(lr))
        warmups = self._warmups.get(key)
        if warmups is None:
            if event.step < _LOOKUP_STEP:
                return
            # Read once, half-way to the shortest run judged, while the schedulers are
            # alive: a run too short to reach this step is never judged, and finding them
            # walks every object of the process (gc), which costs milliseconds.
            warmups = self._warmups[key] = [
                _Warmup(weakref.ref(s), type(s).__name__, float(s.base_lrs[0]), _length(s))
                for s in schedulers_of(event.optimizer.optimizer)
                if type(s).__name__ in _WARMUPS and getattr(s, "base_lrs", None)
            ]
        for warmup in warmups:
            alive = warmup.scheduler()
            if alive is not None:
                warmup.calls = int(getattr(alive, "last_epoch", 0))

    def on_exception(self, exc: BaseException) -> None:
        self._failed = True

    def on_finish(self, report: Any) -> None:
        limit = getattr(self.monitor.options, "max_steps", None)
        if self._failed or (limit is not None and self.monitor.global_step >= limit):
            return  # the script would have gone on: its warm-up may end later
        for info in self.monitor.optimizers:
            lrs = self._lrs.get(id(info))
            if lrs is None or len(lrs) < MIN_STEPS:
                continue
            for warmup in self._warmups.get(id(info), ()):
                if warmup.length is not None and warmup.length <= warmup.calls:
                    continue  # by its own count the warm-up is over
                if still_warming(lrs, warmup.base):
                    self._emit(info, warmup.name, warmup.base, lrs, warmup.length, warmup.calls)
                    break

    def _emit(
        self, info: Any, name: str, base: float, lrs: Any, length: int | None, calls: int
    ) -> None:
        site = self.monitor.optimizer_site(info.optimizer)
        where = f" (optimizer built at {site})" if site is not None else ""
        planned = (
            f"; its warm-up lasts {length} scheduler steps and the run made about {calls}"
            if length is not None
            else ""
        )
        self.emit(
            finding(
                "TD619",
                f"The learning rate of {info.label}{where}, set by `{name}`, was still rising "
                f"at every one of the last {max(2, int(len(lrs) * _TAIL))} of its {len(lrs)} "
                f"steps and ended at {lrs[-1]:.3g}, {lrs[-1] / base:.0%} of the base rate "
                f"{base:.3g} it never reached{planned}: the warm-up never ended, so the whole "
                "run trained below the learning rate that was chosen",
                site.location(object=f"{name} of {info.label}")
                if site is not None
                else Location(object=f"{name} of {info.label}"),
                Depth.RUN,
                fix_hint="Give the warm-up a length in the same unit as `scheduler.step()` "
                "calls (optimizer steps when stepped per batch) and shorter than the "
                "training, e.g. a few percent of the total steps.",
                evidence={
                    "scheduler": name,
                    "optimizer_steps": len(lrs),
                    "lr_end": lrs[-1],
                    "lr_max": max(lrs),
                    "base_lr": base,
                    "warmup_length": length,
                    "scheduler_steps": calls,
                },
            )
        )
