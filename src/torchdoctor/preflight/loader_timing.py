"""How fast a DataLoader delivers batches, measured on clones for the loader probes.

Timings are built to survive a busy machine: other processes only ever add time, so the
loader's own cost is read from the fastest batch seen wherever one can be timed alone
(see :attr:`LoaderTiming.delivered`). Clones come from
:func:`torchdoctor.runtime.loader_clones.clone_loader`: the user's loader, sampler and workers
are never touched, and every clone's workers are shut down before a function returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from torchdoctor.preflight.loading import clone_loader, shut_down

__all__ = ["IN_PROCESS_BATCHES", "LoaderTiming", "time_loader"]


@dataclass(frozen=True, slots=True)
class LoaderTiming:
    """How long a loader takes: to its first batch, and per batch after that."""

    first_batch: float  # seconds from creating the iterator to the first batch
    per_batch: float  # seconds per batch in steady state
    batches: int  # batches timed
    # With workers: the fastest batch loaded in this process, divided by the workers.
    shared_in_process: float | None = None

    @property
    def startup(self) -> float:
        """Seconds the first batch took beyond a steady one (worker start-up)."""
        return max(0.0, self.first_batch - self.per_batch)

    @property
    def delivered(self) -> float:
        """Seconds per batch the loader can deliver: :attr:`per_batch`, or with workers
        the in-process cost shared among them when that is less. Workers that other
        processes starve of CPU deliver slower than they will in training, and a rate is
        an average, which noise only ever adds to; the fastest in-process batch is the
        loader's own cost, as the fastest step is the step's."""
        if self.shared_in_process is None:
            return self.per_batch
        return min(self.per_batch, self.shared_in_process)


IN_PROCESS_BATCHES = 3  # batches loaded in this process to find the fastest, with workers


def _stamps(clone: Any, budget: float, max_batches: int) -> tuple[float, list[float]] | None:
    """When iteration began and when each batch arrived: up to ``max_batches`` after the
    first, within ``budget`` seconds; ``None`` when the loader yields nothing."""
    begin = time.perf_counter()
    iterator = iter(clone)
    try:
        try:
            next(iterator)
        except StopIteration:
            return None
        stamps = [time.perf_counter()]
        while len(stamps) <= max_batches and stamps[-1] - begin < budget:
            try:
                next(iterator)
            except StopIteration:
                break
            stamps.append(time.perf_counter())
    finally:
        shut_down(iterator)
        del iterator
    return begin, stamps


def _fastest(begin: float, stamps: list[float]) -> float:
    return min(b - a for a, b in zip([begin, *stamps], stamps, strict=False))


def _fastest_in_process(loader: Any, budget: float) -> float | None:
    """The fastest of a few batches of ``loader`` loaded in this process, or ``None``."""
    try:
        clone = clone_loader(loader, num_workers=0, multiprocessing_context=None)
        measured = _stamps(clone, budget, IN_PROCESS_BATCHES - 1)
    except Exception:  # noqa: BLE001 - a stream that cannot be copied: the rate stands
        return None
    return None if measured is None else _fastest(*measured)


def time_loader(loader: Any, budget: float, max_batches: int) -> LoaderTiming | None:
    """Time a clone of ``loader``: up to ``max_batches`` batches within ``budget`` seconds.

    Without workers, batches load one at a time in this process and ``per_batch`` is the
    fastest of them: other processes on a busy machine only ever add time, so the fastest
    is the loader's own cost. With workers, ``per_batch`` is the steady rate at which they
    deliver after their first round of batches (see :func:`_steady_rate`), and a few
    batches are also loaded in this process (within half the budget again) for
    :attr:`LoaderTiming.delivered`; that shared cost stands for the rate when the epoch
    is too short to measure one. Returns ``None`` when the
    loader yields nothing.
    """
    measured = _stamps(clone_loader(loader), budget, max_batches)
    if measured is None:
        return None
    begin, stamps = measured
    first, timed = stamps[0] - begin, len(stamps) - 1
    if loader.num_workers == 0:
        # In the training process there is no start-up: the first batch is a batch too.
        return LoaderTiming(first, _fastest(begin, stamps), timed + 1)
    alone = _fastest_in_process(loader, budget / 2)
    shared = alone / loader.num_workers if alone is not None else None
    rate = _steady_rate(stamps, loader.num_workers)
    if rate is None:  # too few batches to see the workers' pace: their shared cost stands
        rate = shared if shared is not None else first
    return LoaderTiming(first, rate, max(timed, 1), shared)


def _steady_rate(stamps: list[float], workers: int) -> float | None:
    """Seconds per batch the workers deliver, from the batches after the first round.

    Each worker loads its first batch at the same time, so the first ``workers`` batches
    arrive together; only the batches after them show the pace. ``None`` when the loader
    yielded too few batches for that (a short epoch).
    """
    if len(stamps) <= workers:
        return None
    return (stamps[-1] - stamps[workers - 1]) / (len(stamps) - workers)
