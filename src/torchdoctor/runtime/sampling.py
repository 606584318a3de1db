"""Which optimizer steps get full statistics, and the per-optimizer bookkeeping.

The schedule is dense at the start, where short runs and early bugs need evidence, then
sparse: every step up to step 8, then every 2, 4, 8, ... up to :data:`MAX_INTERVAL`. On top,
a cost guard measures what a sampled step costs torchdoctor and widens the interval so that
sampling stays under :data:`BUDGET` of the step time, never beyond :data:`EARLY_INTERVAL`
in the first :data:`EARLY_STEPS` steps nor beyond :data:`MAX_INTERVAL` after. When the
loss jumps or turns non-finite, :meth:`Sampler.boost` samples every step for a while, so
an explosion is measured while it happens. ``sample_every=N`` fixes the interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.runtime.detectors.base import OptimizerInfo
from torchdoctor.runtime.stats import ProbeSet, StepStats

__all__ = ["BUDGET", "DENSE_STEPS", "MAX_INTERVAL", "OptimizerState", "Sampler"]

DENSE_STEPS = 8
MAX_INTERVAL = 32
EARLY_STEPS = 256
EARLY_INTERVAL = 16
BOOST_STEPS = 16
MAX_BOOSTS = 4
BUDGET = 0.01  # fraction of step time that sampled statistics may cost


@dataclass(slots=True)
class OptimizerState:
    """Mutable bookkeeping of one optimizer (internal to the monitor)."""

    info: OptimizerInfo
    steps: int = 0
    groups: int = 0
    last_sampled: int = 0
    probes: ProbeSet | None = None
    current: StepStats | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # No step before ``next_due`` is sampled while the cost guard's interval is
    # ``due_cost`` (the sampler's shortcut, see Sampler.should_sample).
    next_due: int = 0
    due_cost: int = 0


class Sampler:
    """Decides whether a step is sampled, and keeps the cost guard's measurements."""

    def __init__(self, every: int | None = None) -> None:
        self.every = every
        self._cost_interval: int = 1
        self._step_time = 0.0  # exponential moving average, seconds
        self._last_step_end: float | None = None
        self._boost_until = 0
        self.boosts = 0
        self.sampled = 0

    def should_sample(self, state: OptimizerState) -> bool:
        """Whether this (the ``state.steps``-th) step of the optimizer is sampled."""
        step = state.steps
        if self.every is not None:
            return step == 1 or step % self.every == 0
        if step <= DENSE_STEPS or step <= self._boost_until:
            return True
        if step < state.next_due and self._cost_interval == state.due_cost:
            return False
        # 2 ** floor(log2(step / DENSE_STEPS)), in integers.
        scheduled = min(MAX_INTERVAL, 1 << ((step // DENSE_STEPS).bit_length() - 1))
        ceiling = EARLY_INTERVAL if step <= EARLY_STEPS else MAX_INTERVAL
        interval = min(ceiling, max(scheduled, self._cost_interval))
        if step - state.last_sampled >= interval:
            return True
        # The interval never shrinks as steps go on (with the cost guard's unchanged), so
        # no step before this one is due: the steps until then answer from two reads.
        state.next_due, state.due_cost = state.last_sampled + interval, self._cost_interval
        return False

    def boost(self, step: int) -> None:
        """Sample every step for the next :data:`BOOST_STEPS` (a few times per run)."""
        if self.boosts < MAX_BOOSTS and step >= self._boost_until:
            self.boosts += 1
            self._boost_until = step + BOOST_STEPS

    def step_finished(self, now: float) -> None:
        """Record the end of a step, to estimate the time of a training step."""
        if self._last_step_end is not None:
            elapsed = now - self._last_step_end
            self._step_time = (
                elapsed if not self._step_time else (0.9 * self._step_time + 0.1 * elapsed)
            )
        self._last_step_end = now

    def sample_cost(self, seconds: float) -> None:
        """Record what one sampled step cost torchdoctor; widen the interval if needed."""
        self.sampled += 1
        if self._step_time > 0:
            needed = seconds / (BUDGET * self._step_time)
            self._cost_interval = max(1, min(1024, math.ceil(needed)))

    @property
    def step_time(self) -> float:
        """The current estimate of one training step's wall time, in seconds."""
        return self._step_time
