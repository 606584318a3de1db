"""Loss dynamics: not decreasing (TD612), diverging (TD613), exactly constant (TD614).

Losses are grouped by the place ``backward()`` is called from, so a GAN's two losses or
a multi-task model's separate backward calls are judged separately. Every verdict uses
medians of windows of the curve, never single values, so mini-batch noise does not
decide; "not decreasing" only looks at the part of the run where the learning rate is at
least half its peak, so a warm-up never looks like a stall. Adversarial set-ups (several
optimizers *and* several backward sites) are not judged on trends at all, and neither is
a loss summed over a variable number of terms (the returns of episodes of different
lengths in policy-gradient and actor-critic training): its size follows the episode's
length, and rises as the agent gets better.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, is_, itemgetter

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
)
from torchdoctor.runtime.detectors.explains import explained_lines

__all__ = ["LossDynamics", "spearman"]

CONSTANT_RUN = 20  # identical consecutive losses that make "constant"
CONSTANT_WHOLE_RUN = 8  # ... or fewer, when they are every loss the run computed
STALL_MIN_VALUES = 100  # losses at the working learning rate needed to call a stall
STALL_MAX_GAIN = 0.05  # a stall improved on its first window by less than this
DIVERGE_MIN_VALUES = 30
DIVERGE_QUANTILE = 0.1  # the part of each window that judges divergence: its low tail
_TERM_CHECKS = 64  # backward passes per site whose graph is read for a variable sum
_GRAPH_NODES = 12  # autograd nodes read from the loss down, at most
_JOINS = frozenset({"StackBackward0", "CatBackward0"})


@dataclass(slots=True)
class _Curve:
    values: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)


@detector("TD612", "TD613", "TD614", depth=Depth.RUN)
class LossDynamics(RuntimeDetector):
    """Judges each loss curve once the run ends."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._curves: dict[CallSite, _Curve] = {}
        self._lrs: list[tuple[int, float]] = []  # (global step, lr) of the first optimizer
        self._optimizers: set[int] = set()
        self._terms: dict[CallSite, set[int]] = {}  # site -> term counts of its summed loss
        self._checked: dict[CallSite, int] = {}
        # Sites whose backward pass is the last before an optimizer step: the training
        # losses. A backward that no step follows (an EWC Fisher estimate, a gradient
        # penalty's own pass, a diagnostic) makes no curve of training.
        self._last_backward: CallSite | None = None
        self._stepping: set[CallSite] = set()
        self._last_stepping: CallSite | None = None
        self._stepped = False
        # Training phases: an optimizer over parameters no optimizer held before (a new
        # head after pre-training, layers unfrozen) starts one at this global step. Each
        # phase's loss is its own curve: the jump where a new head starts is no divergence.
        self._trained_sets: list[frozenset[int]] = []
        self._phases: list[int] = []

    def on_backward(self, event: BackwardEvent) -> None:
        self._last_backward = event.site
        checked = self._checked.get(event.site, 0)
        if checked >= _TERM_CHECKS:
            return
        self._checked[event.site] = checked + 1
        count = _joined_terms(event.loss)
        if count is not None:
            self._terms.setdefault(event.site, set()).add(count)

    def on_losses(self, losses: Sequence[LossValue]) -> None:
        values = list(map(_value, losses))
        site = losses[0].site if losses else None
        curve = self._curves.get(site) if site is not None else None
        if (
            curve is not None
            and all(map(is_, map(_site, losses), repeat(site)))
            and all(map(math.isfinite, values))
        ):
            # One place, every value finite (the usual batch): appended from C.
            curve.values.extend(values)
            curve.steps.extend(map(_global_step, losses))
            return
        for loss in losses:
            if math.isfinite(loss.value):
                curve = self._curves.get(loss.site)
                if curve is None:
                    curve = self._curves[loss.site] = _Curve()
                curve.values.append(loss.value)
                curve.steps.append(loss.global_step)

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        trained = frozenset(map(id, optimizer.params))
        if trained in self._trained_sets:
            return  # the same parameters again (an optimizer rebuilt every epoch)
        if self._trained_sets:
            self._phases.append(self.monitor.global_step)
        self._trained_sets.append(trained)

    def on_step_begin(self, event: StepEvent) -> None:
        self._stepped = True
        last = self._last_backward
        if last is not None and last is not self._last_stepping:
            self._stepping.add(last)
            self._last_stepping = last  # the same site step after step: added once

    def on_step_end(self, event: StepEvent) -> None:
        self._optimizers.add(id(event.optimizer.optimizer))
        if event.optimizer.index != 0:
            return
        lr = event.optimizer.optimizer.param_groups[0].get("lr")
        if isinstance(lr, (int, float)) and (not self._lrs or self._lrs[-1][1] != lr):
            self._lrs.append((event.global_step, float(lr)))

    def on_finish(self, report: Report) -> None:
        adversarial = len(self._curves) > 1 and len(self._optimizers) > 1
        explained = explained_lines(report, "TD612", "TD613", "TD614")  # TD308, TD209
        for site, curve in self._curves.items():
            if site.line in explained or (self._stepped and site not in self._stepping):
                continue  # explained, or a backward that no optimizer step follows
            for phase in self._split(curve):
                if self._judge(site, phase, adversarial):
                    break

    def _split(self, curve: _Curve) -> list[_Curve]:
        """The curve's parts, one per training phase (see ``_phases``)."""
        parts, start = [], 0
        for boundary in self._phases:
            end = bisect.bisect_left(curve.steps, boundary, lo=start)
            parts.append(_Curve(curve.values[start:end], curve.steps[start:end]))
            start = end
        parts.append(_Curve(curve.values[start:], curve.steps[start:]))
        return [part for part in parts if part.values]

    def _judge(self, site: CallSite, curve: _Curve, adversarial: bool) -> bool:
        """Whether one phase of a curve drew a finding."""
        if self._constant(site, curve):
            return True
        if adversarial or len(self._terms.get(site, ())) > 1:
            return False
        return self._diverging(site, curve) or self._stalled(site, curve)

    # -- TD614 ---------------------------------------------------------------------------

    def _constant(self, site: CallSite, curve: _Curve) -> bool:
        # Judged by the passes seen: a short run whose every loss is the same is as
        # constant as the last 20 of a long one (no learning model repeats a float).
        needed = CONSTANT_RUN if len(curve.values) >= CONSTANT_RUN else len(curve.values)
        tail = curve.values[-needed:]
        if needed < CONSTANT_WHOLE_RUN or tail[0] == 0.0 or any(v != tail[0] for v in tail):
            return False
        start = len(curve.values) - needed
        while start > 0 and curve.values[start - 1] == tail[0]:
            start -= 1
        count = len(curve.values) - start
        self.emit(
            finding(
                "TD614",
                f"The loss of {_where(site)} has been exactly {tail[0]!r} for the last {count} "
                f"backward passes (from step {curve.steps[start] + 1}): nothing is learning, "
                "and the output no longer depends on the input (dead or saturated output "
                "activations, a detached output, or a learning rate of 0)",
                _location(site),
                Depth.RUN,
                fix_hint="Remove activations that can die or saturate from the output layer "
                "(no ReLU on logits), compute the loss on the model's live output, and "
                "check that the learning rate is not 0.",
                evidence={"value": tail[0], "repeats": count, "from_step": curve.steps[start] + 1},
            )
        )
        return True

    # -- TD613 ---------------------------------------------------------------------------

    def _diverging(self, site: CallSite, curve: _Curve) -> bool:
        if len(curve.values) < DIVERGE_MIN_VALUES:
            return False
        width = max(3, len(curve.values) // 10)
        # The low tail of each window, not its median: a loss that diverges lifts all of
        # its batches, while outlier batches (corrupted labels, a clipped loss) only lift
        # the upper part of the windows they fall in.
        lows = _window_quantiles(curve.values, width, DIVERGE_QUANTILE)
        best_index = min(range(len(lows)), key=lows.__getitem__)
        first, best, last = lows[0], lows[best_index], lows[-1]
        rising = len(lows) >= 3 and lows[-2] < lows[-1]
        start = best_index * width + len(curve.values) % width
        after = curve.values[start + width :]
        if not (
            rising
            and best_index < len(lows) - 2
            and last - best > max(abs(best), first - best)
            # Above where it started for two windows, or far above it in the last one:
            # a low tail back at its first level is a noisy plateau, not a divergence.
            and (lows[-2] > first or last > 2 * abs(first))
            and len(after) >= 2 * width
            and spearman(after) > 3 / math.sqrt(len(after) - 1)  # a trend, not a jump
        ):
            return False
        self.emit(
            finding(
                "TD613",
                f"The loss of {_where(site)} is diverging: even its lowest values rose, "
                f"from a best of {best:.4g} (around step {curve.steps[start] + 1}) to "
                f"{last:.4g} (10th percentile of windows of {width} passes), and they are "
                "still rising",
                _location(site),
                Depth.RUN,
                fix_hint="Lower the learning rate (10x to start with), add a warm-up, and clip "
                "gradients with `torch.nn.utils.clip_grad_norm_`.",
                evidence={
                    "first": first,
                    "best": best,
                    "last": last,
                    "window": width,
                    "statistic": "10th percentile",
                },
            )
        )
        return True

    # -- TD612 ---------------------------------------------------------------------------

    def _stalled(self, site: CallSite, curve: _Curve) -> bool:
        values, steps = self._working_part(curve)
        if len(values) < STALL_MIN_VALUES:
            return False
        width = max(5, len(values) // 10)
        medians = _window_medians(values, width)
        first, best = medians[0], min(medians[1:])
        gain = (first - best) / abs(first) if first else 0.0
        half = values[len(values) // 2 :]
        trend = spearman(half)
        # Still falling in its second half with a rank correlation three standard errors
        # below zero: slow learning, not a stall.
        if gain >= STALL_MAX_GAIN or trend < -3 / math.sqrt(len(half) - 1):
            return False
        self.emit(
            finding(
                "TD612",
                f"The loss of {_where(site)} has not decreased over {len(values)} backward "
                f"passes (steps {steps[0] + 1}-{steps[-1] + 1}): {first:.4g} in the first "
                f"{width}, {best:.4g} at best, {medians[-1]:.4g} in the last (window medians)",
                _location(site),
                Depth.RUN,
                fix_hint="Check that inputs and targets stay aligned (shuffled together), that "
                "the loss uses the model's output, and that the learning rate is not "
                "tiny; a model that cannot overfit one batch has a bug (`torchdoctor "
                "check`).",
                evidence={
                    "first": first,
                    "best": best,
                    "last": medians[-1],
                    "gain": gain,
                    "trend": trend,
                    "values": len(values),
                },
            )
        )
        return True

    def _working_part(self, curve: _Curve) -> tuple[list[float], list[int]]:
        """The losses computed at >= half the peak learning rate (after any warm-up)."""
        if not self._lrs:
            return curve.values, curve.steps
        peak = max(lr for _, lr in self._lrs)
        if peak <= 0:
            return [], []
        start = next(step for step, lr in self._lrs if lr >= 0.5 * peak)
        kept = [(v, s) for v, s in zip(curve.values, curve.steps, strict=True) if s >= start]
        if self._lrs[-1][1] < 0.5 * peak:  # decayed at the end: cut the tail too
            end = next(step for step, lr in reversed(self._lrs) if lr >= 0.5 * peak)
            kept = [(v, s) for v, s in kept if s <= end + 1]
        return [v for v, _ in kept], [s for _, s in kept]


_value = attrgetter("value")
_site = attrgetter("site")
_global_step = attrgetter("global_step")
_first = itemgetter(0)


def _joined_terms(loss: object) -> int | None:
    """How many tensors the first ``stack``/``cat`` under the loss joins, if any: a loss
    summed over an episode's steps joins as many terms as the episode was long."""
    frontier = [getattr(loss, "grad_fn", None)]
    seen = 0
    while frontier and seen < _GRAPH_NODES:
        node = frontier.pop(0)
        if node is None:
            continue
        seen += 1
        if type(node).__name__ in _JOINS or node.name() in _JOINS:
            return len(node.next_functions)
        frontier.extend(map(_first, node.next_functions))
    return None


def _window_medians(values: list[float], width: int) -> list[float]:
    """Medians of consecutive windows, aligned on the end so the latest values count."""
    start = len(values) % width
    return [statistics.median(values[i : i + width]) for i in range(start, len(values), width)]


def _window_quantiles(values: list[float], width: int, quantile: float) -> list[float]:
    """A low quantile of consecutive windows, aligned on the end like the medians."""
    start = len(values) % width
    at = int(quantile * (width - 1))
    return [sorted(values[i : i + width])[at] for i in range(start, len(values), width)]


def spearman(values: list[float]) -> float:
    """Rank correlation of ``values`` with their position (-1 falling ... 1 rising)."""
    n = len(values)
    if n < 3:
        return 0.0
    order = sorted(range(n), key=values.__getitem__)
    ranks = [0.0] * n
    for rank, index in enumerate(order):
        ranks[index] = float(rank)
    mean = (n - 1) / 2
    covariance = sum((r - mean) * (i - mean) for i, r in enumerate(ranks))
    variance = sum((i - mean) ** 2 for i in range(n))
    return covariance / variance


def _where(site: CallSite) -> str:
    return f"`backward()` at {site}" if site.user else "the training loop"


def _location(site: CallSite) -> Location:
    return site.location(object="loss")
