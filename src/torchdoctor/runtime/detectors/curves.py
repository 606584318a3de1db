"""The run's curves for the report's plots: gradient norms, update sizes, learning rate,
memory, and the step time split into data wait and compute.

This detector reports nothing itself; it keeps what the other detectors already measure
(the numbers of sampled steps, the loader's waits) as series, and the step time of every
step from one clock read per step. It runs whenever one of the rules whose evidence these
curves show is selected (TD215/TD216 gradient scale, TD606 update size).

Series (see :mod:`torchdoctor.report.html_plots` for how they are drawn): ``grad_norm`` and
``grad_norm/<module group>``, ``update_ratio`` (median over parameters), ``lr`` (and
``lr/group<i>``), ``memory_mb`` at sampled steps; ``step_time_ms``, ``data_wait_ms`` and
``compute_ms`` per step. ``facts["series_steps"]`` holds the step of each value.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.runtime.detectors.base import (
    BatchEvent,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
    StepSample,
)
from torchdoctor.runtime.detectors.memory import statm_resident_bytes
from torchdoctor.runtime.detectors.places import param_name

__all__ = ["TrainingCurves", "module_group"]

LIMIT = 2000  # values per series kept in the report (a 100,000-step run stays small)
MAX_GROUPS = 64  # module groups with a gradient-norm curve of their own


def module_group(name: str) -> str:
    """The module group of a parameter: its module path up to the first index
    (``encoder.layers.3.attn.q.weight`` -> ``encoder.layers.3``), else its first two parts."""
    parts = name.split(".")[:-1] or [name]
    for index, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: index + 1])
    return ".".join(parts[:2])


@detector("TD215", "TD216", "TD606", depth=Depth.RUN)
class TrainingCurves(RuntimeDetector):
    """Keeps the run's curves (see the module docstring); emits no finding."""

    def __init__(self) -> None:
        self._optimizer: OptimizerInfo | None = None
        self._groups: dict[int, list[str]] = {}
        self._series: dict[str, tuple[list[float], list[float]]] = {}
        self._ends: list[tuple[int, float]] = []
        self._waits: dict[int, float] = {}
        self._cuda: Any = None

    def on_batch(self, event: BatchEvent) -> None:
        step = event.global_step + 1  # the step this batch feeds
        self._waits[step] = self._waits.get(step, 0.0) + event.wait_s

    def on_step_end(self, event: StepEvent) -> None:
        if not self._ends or event.global_step > self._ends[-1][0]:
            self._ends.append((event.global_step, time.perf_counter()))

    def on_sample(self, sample: StepSample) -> None:
        if self._optimizer is None:
            self._optimizer = sample.optimizer
        if sample.optimizer is not self._optimizer:
            return  # one optimizer's curves: the first one that stepped
        step = float(sample.global_step)
        norms = [n for n in sample.grad_norms if n is not None]
        if norms:
            self._add("grad_norm", step, math.sqrt(sum(n * n for n in norms)))
        for group, value in self._group_norms(sample).items():
            self._add(f"grad_norm/{group}", step, value)
        ratios = [r for r in (sample.update_ratios or ()) if r is not None and math.isfinite(r)]
        if ratios:
            self._add("update_ratio", step, statistics.median(ratios))
        for index, lr in enumerate(sample.lrs):
            self._add("lr" if index == 0 else f"lr/group{index}", step, float(lr))
        memory = self._memory_mb(sample)
        if memory is not None:
            self._add("memory_mb", step, memory)

    def on_finish(self, report: Report) -> None:
        self._step_times()
        steps: dict[str, list[float]] = dict(report.facts.get("series_steps") or {})
        for name, (xs, ys) in self._series.items():
            if len(ys) < 2:
                continue
            stride = -(-len(ys) // LIMIT)
            self.monitor.add_series(name, ys[::stride])
            steps[name] = xs[::stride]
        if steps:
            self.monitor.set_fact("series_steps", steps)

    def _add(self, name: str, step: float, value: float) -> None:
        series = self._series.get(name)
        if series is None:
            series = self._series[name] = ([], [])
        series[0].append(step)
        series[1].append(value)

    def _group_norms(self, sample: StepSample) -> dict[str, float]:
        info = sample.optimizer
        groups = self._groups.get(id(info))
        if groups is None:
            groups = [
                module_group(param_name(self.monitor, info, i)) for i in range(len(info.params))
            ]
            if len(set(groups)) > MAX_GROUPS:
                keep = set(list(dict.fromkeys(groups))[:MAX_GROUPS])
                groups = [g if g in keep else "" for g in groups]
            if len(set(groups) - {""}) < 2:
                groups = []  # one group: its curve is grad_norm itself
            self._groups[id(info)] = groups
        if not groups:
            return {}
        squares: dict[str, float] = {}
        for group, norm in zip(groups, sample.grad_norms, strict=False):
            if group and norm is not None:
                squares[group] = squares.get(group, 0.0) + norm * norm
        return {group: math.sqrt(total) for group, total in squares.items()}

    def _memory_mb(self, sample: StepSample) -> float | None:
        """Allocated CUDA memory of the model's device, or this process's resident memory."""
        params = sample.optimizer.params
        device = params[0].device if params else None
        if device is not None and device.type == "cuda":
            import torch

            return float(torch.cuda.memory_allocated(device)) / 2**20
        resident = statm_resident_bytes()  # a kept descriptor: no open() per sample
        return resident / 2**20 if resident is not None else None

    def _step_times(self) -> None:
        for (_, before), (step, after) in zip(self._ends, self._ends[1:], strict=False):
            total = (after - before) * 1e3
            wait = min(self._waits.get(step, 0.0) * 1e3, total)
            self._add("step_time_ms", float(step), total)
            if self._waits:
                self._add("data_wait_ms", float(step), wait)
                self._add("compute_ms", float(step), total - wait)
