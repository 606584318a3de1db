"""A training loop that waits on its input pipeline (TD409).

The monitor times every ``DataLoader`` ``__next__``; this detector adds up, per loader,
the time spent waiting for batches between the first and the last optimizer step and
compares it with the wall time of that span. A loader is called the bottleneck when the
loop waits on it for a large share of the time *and* for long enough to matter (toy runs
whose whole data time is a fraction of a second are left alone). The advice follows from
the loader's settings: workers, pinned memory, persistent workers.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BatchEvent,
    CallSite,
    LoaderInfo,
    RuntimeDetector,
    StepEvent,
)

__all__ = ["InputPipeline"]

BOUND_FRACTION = 0.30  # share of wall time spent waiting for batches
MIN_WAIT_S = 1.0  # total waiting that is worth a finding
MIN_BATCHES = 5


@dataclass(slots=True)
class _Loader:
    info: LoaderInfo
    site: CallSite | None
    wait: float = 0.0  # since the first step
    epoch_start_wait: float = 0.0
    batches: int = 0
    wait_at_last_step: float = 0.0
    epoch_wait_at_last_step: float = 0.0
    batches_at_last_step: int = 0


@detector("TD409", depth=Depth.RUN)
class InputPipeline(RuntimeDetector):
    """Share of the training wall time spent waiting for the next batch."""

    def __init__(self) -> None:
        self._loaders: dict[int, _Loader] = {}
        self._first_step: float | None = None
        self._last_step: float | None = None
        self._steps = 0
        self._uses_cuda = False
        self.clock = time.perf_counter  # replaceable in tests

    def on_batch(self, event: BatchEvent) -> None:
        loader = self._loaders.get(event.loader_id)
        if loader is None:
            loader = self._loaders[event.loader_id] = _Loader(
                event.loader, self.monitor.user_site()
            )
        if self._first_step is None:
            return  # before training starts: start-up, not the steady state
        loader.wait += event.wait_s
        loader.batches += 1
        if event.first_of_epoch:
            loader.epoch_start_wait += event.wait_s

    def on_step_end(self, event: StepEvent) -> None:
        now = self.clock()
        if self._first_step is None:
            self._first_step = now
            self._uses_cuda = any(p.device.type == "cuda" for p in event.optimizer.params[:1])
        self._last_step = now
        self._steps = event.global_step
        for loader in self._loaders.values():
            loader.wait_at_last_step = loader.wait
            loader.epoch_wait_at_last_step = loader.epoch_start_wait
            loader.batches_at_last_step = loader.batches

    def on_finish(self, report: Report) -> None:
        if self._first_step is None or self._last_step is None:
            return
        span = self._last_step - self._first_step
        if span <= 0:
            return
        worst = 0.0
        for loader in self._loaders.values():
            fraction = loader.wait_at_last_step / span
            worst = max(worst, fraction)
            if (
                fraction >= BOUND_FRACTION
                and loader.wait_at_last_step >= MIN_WAIT_S
                and loader.batches_at_last_step >= MIN_BATCHES
            ):
                self._emit(loader, fraction, span)
        if self._loaders:
            self.monitor.set_fact("input_wait_fraction", round(worst, 3))

    def _emit(self, loader: _Loader, fraction: float, span: float) -> None:
        batches = loader.batches_at_last_step
        per_batch = loader.wait_at_last_step / batches * 1e3
        compute = (span - loader.wait_at_last_step) / max(1, self._steps - 1) * 1e3
        where = f"The loop at {loader.site}" if loader.site else "The training loop"
        self.emit(
            finding(
                "TD409",
                f"{where} waited for the DataLoader {fraction:.0%} of the training time "
                f"({loader.wait_at_last_step:.1f} s of {span:.1f} s): {per_batch:.1f} ms per "
                f"batch against about {compute:.1f} ms of work per step, with "
                f"num_workers={loader.info.num_workers}",
                loader.site.location(object="DataLoader")
                if loader.site
                else Location(object="DataLoader"),
                Depth.RUN,
                fix_hint=self._advice(loader),
                evidence={
                    "wait_fraction": fraction,
                    "wait_s": loader.wait_at_last_step,
                    "span_s": span,
                    "batches": batches,
                    "wait_ms_per_batch": per_batch,
                    "num_workers": loader.info.num_workers,
                    "pin_memory": loader.info.pin_memory,
                    "epoch_start_wait_s": loader.epoch_wait_at_last_step,
                },
            )
        )

    def _advice(self, loader: _Loader) -> str:
        info = loader.info
        cores = os.cpu_count() or 1
        advice = []
        if info.num_workers == 0:
            advice.append(
                f"Load batches in worker processes: `DataLoader(..., num_workers="
                f"{max(2, min(8, cores - 1))})` (this machine has {cores} cores)"
            )
        elif info.num_workers < cores - 1:
            advice.append(
                f"Raise `num_workers` from {info.num_workers} (this machine has {cores} cores)"
            )
        else:
            advice.append(
                "Make `__getitem__` cheaper (decode or augment less per item, "
                "cache preprocessed data)"
            )
        if (
            info.num_workers
            and not info.persistent_workers
            and (loader.epoch_wait_at_last_step > 0.25 * loader.wait_at_last_step)
        ):
            advice.append("keep workers alive across epochs with `persistent_workers=True`")
        if self._uses_cuda and not info.pin_memory:
            advice.append("pass `pin_memory=True` and copy with `.to(device, non_blocking=True)`")
        return "; ".join(advice) + "."
