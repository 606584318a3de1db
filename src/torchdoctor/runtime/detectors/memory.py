"""Memory that grows step after step (TD706), plus the run's memory facts.

At sampled steps of the first optimizer the detector records CUDA's allocated bytes when
the parameters are on a CUDA device, the process's resident memory otherwise (Linux
``/proc/self/statm``; peak RSS from ``getrusage`` elsewhere). A growth is reported when a
straight line fits the samples after the start-up phase well (R^2 >= 0.8) and the growth
it predicts over the run is large in absolute and relative terms; allocator noise and the
optimizer state created at the first step do not qualify.

A leak keeps data from every step: memory rises all through the loop, and no slower at
the end of the run than at its start. Warm-up does neither. A run of several tasks or
phases that each build their loaders, buffers and state grows in a few jumps as each
phase starts and stays flat in between, however well a line fits the staircase; allocator
caches level off. So the growth must also be sustained: memory rises (by at least a
quarter of the fitted rate) over at least half of the judged steps, and the later half of
those steps makes at least 30% of the rise.
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.cuda import SyncCounter, cuda_memory_facts
from torchdoctor.runtime.detectors.base import OptimizerInfo, RuntimeDetector, StepEvent

__all__ = [
    "MemoryGrowth",
    "fit_line",
    "later_half_share",
    "resident_bytes",
    "rising_share",
    "statm_resident_bytes",
]

MIB = 1024 * 1024
_MIN_SAMPLES = 8
_THRESHOLDS = {"cuda": (16 * MIB, 0.05), "rss": (48 * MIB, 0.10)}  # absolute, relative
_SYNC_EVERY = 4  # count syncs during one step every this many sampled steps (CUDA)
_RISING = 0.25  # a stretch of steps rises if it gains a quarter of the fitted rate
_SUSTAINED = 0.5  # share of the steps that must rise: a leak ~1, a staircase of tasks less
_LATER_HALF = 0.3  # share of the rise made in the later half: a leak ~0.5, warm-up less


# A kept file descriptor and the process that opened it: reopening procfs costs ~50 us a
# read, and a forked child must not read its parent's /proc/self (it names the opener).
_STATM: list[tuple[int, int]] = []


def statm_resident_bytes() -> int | None:
    """Current resident memory of this process from ``/proc/self/statm`` (Linux), read
    through a kept file descriptor; ``None`` where it cannot be read."""
    try:
        pid = os.getpid()
        if _STATM and _STATM[0][0] != pid:
            os.close(_STATM.pop()[1])  # the parent's, inherited by fork
        if not _STATM:
            _STATM.append((pid, os.open("/proc/self/statm", os.O_RDONLY)))
        return int(os.pread(_STATM[0][1], 128, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def resident_bytes() -> int | None:
    """Current resident memory of this process (peak RSS where "current" is unknown)."""
    current = statm_resident_bytes()
    if current is not None:
        return current
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)
    except (ImportError, OSError):
        return None


def fit_line(points: list[tuple[int, int]]) -> tuple[float, float]:
    """Least-squares slope (bytes per step) and R^2 of ``(step, bytes)`` points."""
    xs, ys = [float(x) for x, _ in points], [float(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return 0.0, 0.0
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / sxx, sxy * sxy / (sxx * syy)


def rising_share(points: list[tuple[int, int]], slope: float) -> float:
    """The share of the steps between ``points`` over which memory rose by at least a
    quarter of ``slope`` (bytes per step): about 1 for a leak, small for a staircase."""
    span = points[-1][0] - points[0][0]
    rising = sum(
        x1 - x0
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False)
        if y1 - y0 >= _RISING * slope * (x1 - x0)
    )
    return rising / span if span > 0 else 0.0


def later_half_share(points: list[tuple[int, int]]) -> float:
    """The share of the rise over ``points`` made after the middle step."""
    middle = (points[0][0] + points[-1][0]) / 2
    rose = points[-1][1] - points[0][1]
    at_middle = next(y for x, y in points if x >= middle)
    return (points[-1][1] - at_middle) / rose if rose > 0 else 0.0


@detector("TD706", depth=Depth.RUN)
class MemoryGrowth(RuntimeDetector):
    """Fits a line to memory over steps; reports a steady, significant growth."""

    def __init__(self) -> None:
        self._points: list[tuple[int, int]] = []
        self._device: Any = None
        self._kind = "rss"
        self._syncs: SyncCounter | None = None
        self._samples = 0

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        if optimizer.index != 0 or not optimizer.params:
            return
        device = optimizer.params[0].device
        if device.type == "cuda":
            import torch

            if torch.cuda.is_available():
                self._device, self._kind = device, "cuda"
                self._syncs = SyncCounter(torch)

    def on_step_end(self, event: StepEvent) -> None:
        if event.optimizer.index != 0:
            return
        syncs = self._syncs
        if syncs is not None and syncs.active:
            syncs.stop()
        if not event.sampled:
            return
        self._samples += 1
        value = self._measure()
        if value is not None:
            self._points.append((event.global_step, value))
        if syncs is not None and self._samples % _SYNC_EVERY == 2:
            syncs.start()

    def _measure(self) -> int | None:
        if self._kind == "cuda":
            import torch

            return int(torch.cuda.memory_allocated(self._device))
        return resident_bytes()

    def on_finish(self, report: Report) -> None:
        if self._syncs is not None:
            self._syncs.stop()
            if self._syncs.windows:
                self.monitor.set_fact("cuda_syncs_per_step", statistics.median(self._syncs.windows))
        if self._kind == "cuda":
            import torch

            self.monitor.set_fact("cuda", cuda_memory_facts(torch, self._device))
        elif (rss := resident_bytes()) is not None:
            self.monitor.set_fact("resident_mib", round(rss / MIB, 1))
        self._judge()

    def _judge(self) -> None:
        if not self._points:
            return
        last_step = self._points[-1][0]
        warm = max(3, last_step // 10)
        points = [p for p in self._points if p[0] > warm]
        if len(points) < _MIN_SAMPLES or points[-1][0] - points[0][0] < 20:
            return
        slope, r2 = fit_line(points)
        span = points[-1][0] - points[0][0]
        growth = slope * span
        absolute, relative = _THRESHOLDS[self._kind]
        start = points[0][1]
        rose = points[-1][1] - start
        if r2 < 0.8 or growth < absolute or growth < relative * start or rose < 0.8 * growth:
            return
        sustained = rising_share(points, slope)
        later = later_half_share(points)
        if sustained < _SUSTAINED or later < _LATER_HALF:
            return  # a few jumps (one per task or phase), or a level reached: warm-up
        what = (
            f"CUDA memory allocated on {self._device}"
            if self._kind == "cuda"
            else "The process's resident memory"
        )
        self.emit(
            finding(
                "TD706",
                f"{what} grew steadily by {growth / MIB:.0f} MiB over {span} steps "
                f"({slope / MIB:.2f} MiB per step, R^2 {r2:.2f}, from {start / MIB:.0f} MiB): "
                f"something keeps data from every step alive; at this rate that is "
                f"{slope * 10_000 / (1024 * MIB):.1f} GiB more per 10,000 steps",
                Location(object="cuda memory" if self._kind == "cuda" else "process memory"),
                Depth.RUN,
                fix_hint="Store `.item()` or `.detach().cpu()` copies in logs and metric lists, "
                "bound caches, and do not keep outputs or losses of every step.",
                evidence={
                    "slope_mib_per_step": slope / MIB,
                    "r2": r2,
                    "growth_mib": growth / MIB,
                    "steps": span,
                    "start_mib": start / MIB,
                    "samples": len(points),
                    "rising_share": sustained,
                    "later_half_share": later,
                },
            )
        )
