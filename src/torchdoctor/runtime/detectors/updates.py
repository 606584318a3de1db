"""Update-to-weight ratios out of band (TD606).

Reads the per-parameter update ratios of sampled steps (:class:`StepSample`) and judges each
weight matrix at the working learning rate: a single step larger than the weights, or a
median step that replaces a large part of them (or barely moves them).

Quasi-Newton and line-search optimizers (``torch.optim.LBFGS``, or any optimizer whose
``step(closure)`` evaluates the closure more than once) choose their own step length: a
first L-BFGS step several times the size of a small weight matrix is normal, and so are
tiny steps once it has converged. They are judged by one rule only: a step far larger than
the weights *after which the loss was worse*.

Every verdict of "too large" is judged by its outcome: the losses whose gradients an
optimizer consumed are its curve, and a run whose curve fell clearly (layer-local losses
of forward-forward training, fast fine-tuning) is learning, however large its steps look.
Messages name the parameter by its module path and the optimizer's parameter group.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    CallSite,
    LossValue,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
    StepSample,
)
from torchdoctor.runtime.detectors.explains import Scope, explained_names
from torchdoctor.runtime.detectors.places import param_name
from torchdoctor.runtime.detectors.scale import weight_matrices

__all__ = ["UpdateRatio"]

UPDATE_TOO_LARGE = 0.3  # a step replacing this fraction of a weight matrix
UPDATE_TOO_SMALL = 1e-6  # a step moving the weights by less than this fraction
STEP_JUMP = 1.0  # one step larger than the weights themselves
LINE_SEARCH_JUMP = 100.0  # the same, for optimizers that pick their own step length
CONVERGING = 0.9  # last window median below this share of the first: learning
_value = attrgetter("value")
_index = attrgetter("index")
_global_step = attrgetter("global_step")
_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # consumes an iterator
_MIN_CURVE = 10  # losses an optimizer's curve needs before it can clear a verdict
_MAX_RUNS = 10_000  # runs of one optimizer's steps remembered (alternating GANs)


@detector("TD606", depth=Depth.RUN)
class UpdateRatio(RuntimeDetector):
    """Update-to-weight ratio of each weight matrix, judged at the working learning rate."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._samples: dict[int, list[StepSample]] = {}
        self._site: dict[int, CallSite | None] = {}
        self._line_search: set[int] = set()
        self._closure_backwards: int | None = None  # counting inside a sampled closure step
        self._first_loss: dict[int, float] = {}  # global step -> its first loss
        self._last_backward = -1
        self._step_backward = -1  # the last backward before the last step
        self._owner: list[tuple[int, int]] = []  # (first backward index, optimizer key)
        self._losses: list[tuple[int, float]] = []  # (backward index, finite loss)

    def on_step_begin(self, event: StepEvent) -> None:
        self._own_backwards(id(event.optimizer))
        if not event.sampled:
            return
        if id(event.optimizer) not in self._site:
            self._site[id(event.optimizer)] = self.monitor.user_site()
        if _is_quasi_newton(event.optimizer):
            self._line_search.add(id(event.optimizer))
        self._closure_backwards = 0 if event.closure else None

    def on_backward(self, event: BackwardEvent) -> None:
        self._last_backward = event.index
        if self._closure_backwards is not None:
            self._closure_backwards += 1

    def _own_backwards(self, key: int) -> None:
        """The backward passes since the previous step belong to the optimizer stepping now
        (kept as the first index of each run of one optimizer's steps)."""
        if (not self._owner or self._owner[-1][1] != key) and len(self._owner) < _MAX_RUNS:
            self._owner.append((self._step_backward + 1, key))
        self._step_backward = self._last_backward

    def on_step_end(self, event: StepEvent) -> None:
        if (self._closure_backwards or 0) > 1:  # the closure was evaluated several times
            self._line_search.add(id(event.optimizer))
        self._closure_backwards = None

    def on_losses(self, losses: Sequence[LossValue]) -> None:
        values = list(map(_value, losses))
        if all(map(math.isfinite, values)):  # the usual batch: kept from C, in order
            _drain(map(self._first_loss.setdefault, map(_global_step, losses), values))
            self._losses.extend(zip(map(_index, losses), values, strict=True))
            return
        for loss in losses:
            self._first_loss.setdefault(loss.global_step, loss.value)
            if math.isfinite(loss.value):
                self._losses.append((loss.index, loss.value))

    def _owner_of(self, index: int) -> int | None:
        """The optimizer whose step consumed the gradients of backward pass ``index``."""
        at = bisect.bisect_right(self._owner, (index, math.inf)) - 1
        return self._owner[at][1] if at >= 0 else None

    def _converging(self, key: int) -> bool:
        """Whether the optimizer's loss curve fell clearly from its start to its end."""
        curve = [value for index, value in self._losses if self._owner_of(index) == key]
        if len(curve) < _MIN_CURVE:
            return False
        width = max(3, len(curve) // 5)
        first, last = statistics.median(curve[:width]), statistics.median(curve[-width:])
        return last < CONVERGING * first if first > 0 else last < first

    def on_sample(self, sample: StepSample) -> None:
        if sample.update_ratios is not None:
            self._samples.setdefault(id(sample.optimizer), []).append(sample)

    def on_finish(self, report: Report) -> None:
        vanishing = explained_names(report, "TD606", Scope.OPTIMIZER)
        for key, samples in self._samples.items():
            info = samples[0].optimizer
            weights = weight_matrices(info, self.monitor)
            if key in self._line_search:
                self._line_search_jump(info, samples, weights, self._site.get(key))
                continue
            if self._converging(key):
                continue  # judged by its outcome: this optimizer's loss fell, it learns
            if self._jump(info, samples, weights, self._site.get(key)):
                continue
            medians = _median_ratios(samples, weights)
            if medians:
                self._judge(info, medians, self._site.get(key), info.label in vanishing)

    def _jump(
        self,
        info: OptimizerInfo,
        samples: list[StepSample],
        weights: list[int],
        site: CallSite | None,
    ) -> bool:
        """Steps that moved a weight matrix by more than its own size, more than once."""
        jumps = [
            (sample, found)
            for sample in samples
            if (found := _largest_ratio(sample, weights, STEP_JUMP)) is not None
        ]
        if len(jumps) < 2:
            return False  # one outlier step does not persist
        sample, (ratio, index) = jumps[0]
        self._emit(
            info,
            site,
            self._name(info, index),
            ratio,
            "large",
            f"at step {sample.step} a single update was {ratio:.3g} times the size of "
            f"the weights ({len(jumps)} of {len(samples)} sampled steps were), and "
            "the loss did not fall: training is thrown off and usually diverges",
            "Lower the learning rate, or use a mean (not summed) loss so that "
            "gradients do not scale with the batch.",
        )
        return True

    def _line_search_jump(
        self,
        info: OptimizerInfo,
        samples: list[StepSample],
        weights: list[int],
        site: CallSite | None,
    ) -> None:
        """A step far larger than the weights that left the loss worse than before it."""
        for sample in samples:
            found = _largest_ratio(sample, weights, LINE_SEARCH_JUMP)
            before = self._first_loss.get(sample.global_step - 1)
            after = self._first_loss.get(sample.global_step)
            if found is None or before is None or after is None or not after > before:
                continue
            ratio, index = found
            self._emit(
                info,
                site,
                self._name(info, index),
                ratio,
                "large",
                f"at step {sample.step} a single update was {ratio:.3g} times the "
                f"size of the weights and the loss rose from {before:.4g} to "
                f"{after:.4g}, so the line search overshot",
                'Lower the learning rate, use `line_search_fn="strong_wolfe"`, or '
                "limit `max_iter` of the first steps.",
            )
            return

    def _judge(
        self, info: OptimizerInfo, medians: dict[int, float], site: CallSite | None, vanishing: bool
    ) -> None:
        worst = max(medians, key=lambda i: medians[i])
        overall = statistics.median(medians.values())
        if medians[worst] > UPDATE_TOO_LARGE:
            self._emit(
                info,
                site,
                self._name(info, worst),
                medians[worst],
                "large",
                "each step replaces a large part of the weights, and the loss did not "
                "fall: training is unstable or diverges",
                "Lower the learning rate (by 10x to start with).",
            )
        elif 0 < overall < UPDATE_TOO_SMALL and not vanishing:  # TD215 says why
            self._emit(
                info,
                site,
                info.label,
                overall,
                "small",
                "the weights barely move, so the model learns nothing in a useful time",
                "Raise the learning rate (check it for a typo such as 1e-9).",
            )

    def _name(self, info: OptimizerInfo, index: int) -> str:
        """``encoder.0.weight``: the parameter's path in its model."""
        return param_name(self.monitor, info, index)

    def _group_text(self, info: OptimizerInfo, name: str) -> str:
        """`` (parameter group 1)`` when the optimizer has several groups."""
        groups = info.optimizer.param_groups
        if len(groups) < 2:
            return ""
        for g, group in enumerate(groups):
            if any(self.monitor.param_name(p) == name for p in group["params"]):
                return f" (parameter group {g})"
        return ""

    def _emit(
        self,
        info: OptimizerInfo,
        site: CallSite | None,
        obj: str,
        ratio: float,
        kind: str,
        why: str,
        fix: str,
    ) -> None:
        lr = ", ".join(f"{g.get('lr')}" for g in info.optimizer.param_groups)
        subject = (
            f"`{obj}`{self._group_text(info, obj)}"
            if kind == "large"
            else f"the weights of {info.label}"
        )
        self.emit(
            finding(
                "TD606",
                f"Updates of {subject} are too {kind}: {info.label} steps change them by "
                f"{ratio:.2e} of their size (healthy training is near 1e-3) at lr {lr}: {why}",
                site.location(object=obj) if site is not None else Location(object=obj),
                Depth.RUN,
                fix_hint=fix,
                evidence={"optimizer": info.label, "update_ratio": ratio, "lr": lr},
            )
        )


def _is_quasi_newton(info: OptimizerInfo) -> bool:
    import torch

    return isinstance(info.optimizer, torch.optim.LBFGS)


def _largest_ratio(
    sample: StepSample, weights: list[int], limit: float
) -> tuple[float, int] | None:
    """The largest update ratio of a weight matrix above ``limit``, with its index."""
    ratios = sample.update_ratios or ()
    jumps = [
        (r, i)
        for i in weights
        if i < len(ratios) and (r := ratios[i]) is not None and math.isfinite(r) and r > limit
    ]
    return max(jumps) if jumps else None


def _median_ratios(samples: list[StepSample], weights: list[int]) -> dict[int, float]:
    """Per weight matrix, the median ratio over samples taken at >= half the peak lr."""
    peak = [max(s.lrs[g] for s in samples) for g in range(len(samples[0].lrs))]
    working = [
        s
        for s in samples[1:]
        if all(s.lrs[g] >= 0.5 * peak[g] for g in range(len(peak)) if peak[g] > 0)
    ]
    medians: dict[int, float] = {}
    for index in weights:
        values = [
            r
            for s in working
            if s.update_ratios is not None
            and (r := s.update_ratios[index]) is not None
            and math.isfinite(r)
        ]
        if len(values) >= 3:
            medians[index] = statistics.median(values)
    return medians
