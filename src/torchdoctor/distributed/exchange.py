"""torchdoctor's own cross-rank traffic: a separate gloo group, fixed-size messages.

The user's collectives run on the user's process groups; torchdoctor never adds an
operation to them, so their order and their timing are untouched. At
``init_process_group`` (or when a watch starts in a job whose group already exists) every
rank builds one more group with ``dist.new_group(backend="gloo")``: all ranks call it at
the same point of the program, as ``new_group`` requires.

A check is one ``all_reduce(MAX)`` of a short float64 vector holding each value and its
negation, so every rank learns the smallest and the largest value of every entry across
ranks: a fixed number of bytes, one round trip, whatever the number of ranks. Details
(which tensors differ) are exchanged the same way, and only after a mismatch. Every
exchange has a timeout; after a failure (a rank died, or stopped calling) the exchange
switches itself off and says why, and the run carries on unwatched across ranks.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["DEFAULT_TIMEOUT_S", "Exchange", "Extremes", "Pending"]

DEFAULT_TIMEOUT_S = 120.0
_FINITE_LIMIT = 1e300  # NaN and infinities are sent as this: MAX must stay well defined


class Extremes:
    """The smallest and largest value of each entry across ranks."""

    __slots__ = ("high", "low")

    def __init__(self, low: list[float], high: list[float]) -> None:
        self.low = low
        self.high = high

    def agree(self, index: int) -> bool:
        """Whether every rank sent the same value at ``index`` (up to rounding)."""
        low, high = self.low[index], self.high[index]
        return high - low <= 1e-9 * (abs(high) + abs(low)) + 1e-300

    def differing(self, start: int = 0, stop: int | None = None) -> list[int]:
        """Indices (relative to ``start``) whose values differ across ranks."""
        stop = len(self.low) if stop is None else stop
        return [i - start for i in range(start, stop) if not self.agree(i)]


class Exchange:
    """One rank's end of torchdoctor's gloo group.

    Attributes:
        rank: this process's rank in the default group.
        world_size: the number of ranks.
        failure: why the exchange stopped (``None`` while it works).
        rounds: exchanges done; ``bytes_sent``: payload bytes this rank contributed.
    """

    def __init__(self, torch: ModuleType, timeout_s: float | None = None) -> None:
        dist = torch.distributed
        self._torch = torch
        self._dist = dist
        self.rank = int(dist.get_rank())
        self.world_size = int(dist.get_world_size())
        self.failure: str | None = None
        self.rounds = 0
        self.bytes_sent = 0
        seconds = timeout_s if timeout_s is not None else _timeout_from_env()
        self.timeout_s = seconds
        self._group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=seconds))

    @property
    def usable(self) -> bool:
        """Whether exchanges still run (more than one rank, no failure so far)."""
        return self.failure is None and self.world_size > 1

    def extremes(self, values: Sequence[float]) -> Extremes | None:
        """Smallest and largest of each value across ranks; ``None`` once failed."""
        pending = self.start(values)
        return pending.result() if pending is not None else None

    def start(self, values: Sequence[float]) -> Pending | None:
        """Start the exchange of ``values`` without waiting for the other ranks.

        The ranks meet in the background; :meth:`Pending.result` collects the answer
        (later, at a point every rank reaches, so that no rank waits for a slower one).
        ``None`` once failed.
        """
        if not self.usable:
            return None
        torch = self._torch
        clean = [_finite(v) for v in values]
        vector = torch.tensor(clean + [-v for v in clean], dtype=torch.float64)
        try:
            work = self._dist.all_reduce(
                vector, op=self._dist.ReduceOp.MAX, group=self._group, async_op=True
            )
        except Exception as error:  # noqa: BLE001 - a dead or late rank: stop exchanging
            self._failed(error)
            return None
        self.rounds += 1
        self.bytes_sent += vector.numel() * vector.element_size()
        return Pending(self, work, vector, len(clean))

    def _failed(self, error: BaseException) -> None:
        self.failure = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"

    def close(self) -> None:
        """Forget the group (it is destroyed with the user's default group)."""
        self._group = None


class Pending:
    """An exchange under way; :meth:`result` collects it."""

    __slots__ = ("_count", "_exchange", "_vector", "_work")

    # No ``done()`` poll: a rank that collected as soon as its own side completed would
    # collect at a different step than the others (see ``detectors.is_due``).

    def __init__(self, exchange: Exchange, work: Any, vector: Any, count: int) -> None:
        self._exchange = exchange
        self._work = work
        self._vector = vector
        self._count = count

    def result(self) -> Extremes | None:
        """Wait (at most the exchange's timeout) and return the extremes; ``None`` when
        the exchange failed (a rank died or never came)."""
        try:
            self._work.wait()
        except Exception as error:  # noqa: BLE001
            self._exchange._failed(error)
            return None
        both = self._vector.tolist()
        count = self._count
        return Extremes([-v for v in both[count:]], both[:count])


def _finite(value: float) -> float:
    if math.isnan(value):
        return _FINITE_LIMIT
    return max(-_FINITE_LIMIT, min(_FINITE_LIMIT, float(value)))


def _timeout_from_env() -> float:
    try:
        return float(os.environ.get("TORCHDOCTOR_DIST_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def make_exchange(torch: ModuleType) -> Any:
    """An :class:`Exchange` when the default group exists and spans several ranks."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    if dist.get_world_size() < 2:
        return None
    return Exchange(torch)
