"""Which optimizer's step consumed each loss: one loss curve per optimizer.

Training with several optimizers alternates their losses: a GAN's discriminator loss, then
its generator loss, every iteration. Judged as one curve, the two mix, and a generator
that plateaus hides behind a discriminator whose loss falls. :class:`LossOwners` follows
the steps and the backward passes: the backward passes since the previous step belong to
the optimizers that step next, before the next backward pass (one optimizer in a GAN's
alternation; all of them when several optimizers step on one backward pass). A run with
one optimizer, or with the same optimizers at every step, keeps one curve: every loss, in
the order it was read, exactly as without this bookkeeping.

The cost is two integer comparisons per step and per backward pass; ownership is stored
as runs of backward passes with the same owners (one run for a single optimizer, two per
iteration for a GAN), in compact arrays.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

__all__ = ["LossOwners"]

_index = attrgetter("index")
_value = attrgetter("value")


class LossOwners:
    """Loss values with the optimizers that consumed them (keys are ``id(optimizer)``)."""

    def __init__(self) -> None:
        self._indices = array("q")  # backward index of each loss, in the order read
        self.values = array("d")  # each loss (NaN as +inf)
        self._starts = array("q")  # first backward index of each closed run
        self._owner_ids = array("q")  # its owners, as an index into _sets
        self._sets: dict[frozenset[int], int] = {}
        self._open: set[int] | None = None  # owners of the run still open
        self._open_single: int | None = None  # its owner when it has exactly one
        self._open_start = 0
        self._consumed = -1  # last backward index consumed by a step
        self._last_backward = -1

    def backward(self, index: int) -> None:
        """Backward pass ``index`` ran."""
        self._last_backward = index

    def step(self, key: int) -> None:
        """The optimizer ``key`` starts a step."""
        if self._open is None or self._last_backward > self._consumed:
            if self._open_single != key:  # else the same lone optimizer again: run goes on
                self._close()
                self._open, self._open_single = {key}, key
                self._open_start = self._consumed + 1
            self._consumed = self._last_backward
        elif key not in self._open:  # another optimizer steps on the same backward passes
            self._open.add(key)
            self._open_single = None

    def add(self, index: int, value: float) -> None:
        """The loss of backward pass ``index`` was read."""
        self._indices.append(index)
        self.values.append(math.inf if math.isnan(value) else value)

    def extend(self, losses: Sequence[Any]) -> None:
        """:meth:`add` for each ``LossValue`` of a batch, in order (from C when none is
        NaN)."""
        values = list(map(_value, losses))
        if any(map(math.isnan, values)):
            for loss in losses:
                self.add(loss.index, loss.value)
            return
        self._indices.extend(map(_index, losses))
        self.values.extend(values)

    def curve(self, key: int) -> Sequence[float]:
        """The losses whose gradients optimizer ``key`` consumed, in the order read (the
        passes after the last step count for the optimizers of the last run)."""
        self._close()
        owners = [set(s) for s, _ in sorted(self._sets.items(), key=lambda item: item[1])]
        if len(owners) <= 1:
            return self.values if owners and key in owners[0] else array("d")
        starts, ids = self._starts, self._owner_ids
        return [
            value
            for index, value in zip(self._indices, self.values, strict=True)
            if key in owners[ids[max(0, bisect.bisect_right(starts, index) - 1)]]
        ]

    def _close(self) -> None:
        if self._open is None:
            return
        owners = self._sets.setdefault(frozenset(self._open), len(self._sets))
        if not self._owner_ids or self._owner_ids[-1] != owners:
            self._starts.append(self._open_start)
            self._owner_ids.append(owners)
        self._open = self._open_single = None
