"""Gradient sizes over time: vanishing (TD215) and exploding (TD216) gradients.

Both read the per-parameter numbers of sampled steps (:class:`StepSample`); none
computes anything on the device itself. Verdicts use medians over several samples, so a
single spike or a warm-up never decides alone.

Both are statistical, so both are judged by their outcome as well as by their symptom.
TD215 needs the symptom to persist (the earliest layers' gradient below ``VANISH_RATIO``
of the latest's at most sampled steps of the later two thirds of the run) and the outcome
it predicts: the earliest layers barely learn. That is read from the relative size of
their updates next to the latest layers' (``||delta W|| / ||W||``, measured on the sampled
steps). Updates below ``NEGLIGIBLE_UPDATE`` of the latest layers' are reported whatever
the loss does (a loss can fall a little with the last layers alone learning on fixed
random features); updates below ``LAGGING_UPDATE`` only with a loss that does not clearly
fall; larger ones never: with Adam-style optimizers tiny gradients still give updates of
normal size, so the attention query/key weights of a freshly initialised transformer
(tiny gradients while attention is near uniform) are not reported. Where no update was
measured, the loss decides alone. TD216 is not reported while the loss clearly falls.
The loss is the optimizer's own: with several optimizers (a GAN's discriminator and
generator), each is judged by the losses whose gradients its steps consumed
(:mod:`~torchdoctor.runtime.detectors.owners`), never by a mix of both curves.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from torchdoctor.runtime.detectors.owners import LossOwners
from torchdoctor.runtime.detectors.places import param_name

__all__ = ["GradientScale", "weight_matrices"]

EXPLODE_FACTOR = 100.0  # sustained growth of the total gradient norm
VANISH_RATIO = 1e-4  # RMS gradient of the earliest layers vs the latest
PERSIST = 0.75  # share of the judged samples that must show the vanishing
NEGLIGIBLE_UPDATE = 1e-3  # earliest layers' relative update vs the latest layers'...
LAGGING_UPDATE = 0.05  # ...and the share below which they lag (judged with the loss)
CONVERGING = 0.9  # last loss window median below this share of the first: learning
_MIN_SAMPLES = 6
_MIN_CURVE = 10  # losses needed before the curve counts as evidence
_SKIPPED_MODULES = ("Embedding", "EmbeddingBag")  # sparse-by-nature gradients


@dataclass(slots=True)
class _History:
    info: OptimizerInfo
    totals: list[tuple[int, float]] = field(default_factory=list)
    per_param: list[tuple[int, list[float | None]]] = field(default_factory=list)
    depth_ratio: list[float] = field(default_factory=list)
    update_share: list[float] = field(default_factory=list)  # earliest / latest update
    site: CallSite | None = None


def weight_matrices(info: OptimizerInfo, monitor: Any) -> list[int]:
    """Indices of the optimizer's weight matrices (2-D and up), embeddings excluded."""
    skipped: set[int] = set()
    for model in monitor.models:
        for module in model.inner.modules():
            if type(module).__name__ in _SKIPPED_MODULES:
                skipped.update(id(p) for p in module.parameters(recurse=False))
    return [i for i, p in enumerate(info.params) if p.dim() >= 2 and id(p) not in skipped]


@detector("TD215", "TD216", depth=Depth.RUN)
class GradientScale(RuntimeDetector):
    """Gradient norms per layer over time: sustained explosion, early layers vanishing."""

    def __init__(self) -> None:
        self._history: dict[int, _History] = {}
        self._weights: dict[int, list[int]] = {}
        self._losses = LossOwners()  # one loss curve per optimizer (a GAN has two)
        self._curves: dict[int, Sequence[float]] = {}

    def on_losses(self, losses: Sequence[LossValue]) -> None:
        self._losses.extend(losses)

    def on_backward(self, event: BackwardEvent) -> None:
        self._losses.backward(event.index)

    def on_step_begin(self, event: StepEvent) -> None:
        self._losses.step(id(event.optimizer.optimizer))
        if not event.sampled:
            return
        history = self._history.get(id(event.optimizer))
        if history is not None and history.site is None:
            history.site = self.monitor.user_site()

    def on_sample(self, sample: StepSample) -> None:
        info = sample.optimizer
        history = self._history.get(id(info))
        if history is None:
            history = self._history[id(info)] = _History(info)
        norms = sample.grad_norms
        finite = [n for n in norms if n is not None and math.isfinite(n)]
        if not finite or len(finite) != len([n for n in norms if n is not None]):
            return  # no gradients, or non-finite ones (TD212's business)
        history.totals.append((sample.step, math.sqrt(sum(n * n for n in finite))))
        history.per_param.append((sample.step, list(norms)))
        weights = self._weights.get(id(info))
        if weights is None:
            weights = self._weights[id(info)] = weight_matrices(info, self.monitor)
        ratio = _depth_ratio(info, norms, weights)
        if ratio is not None:
            history.depth_ratio.append(ratio)
            if sample.update_ratios is not None:
                share = _update_share(sample.update_ratios, weights)
                if share is not None:
                    history.update_share.append(share)

    def on_finish(self, report: Report) -> None:
        uncleared = explained_names(report, "TD216", Scope.OPTIMIZER)
        for history in self._history.values():
            if len(history.totals) < _MIN_SAMPLES:
                continue
            exploded = history.info.label not in uncleared and self._exploding(history)
            if not exploded:  # saturated activations during an explosion are not the cause
                self._vanishing(history)

    def _exploding(self, history: _History) -> bool:
        values = [v for _, v in history.totals]
        base = statistics.median(values[:3])
        now = statistics.median(values[-3:])
        if base <= 0 or now < EXPLODE_FACTOR * base:
            return False
        if self._loss_falls(history):
            return False  # judged by its outcome: the loss clearly falls
        first_step, last_step = history.totals[0][0], history.totals[-1][0]
        layers = _fastest_growing(history, self.monitor)
        self.emit(
            finding(
                "TD216",
                f"The gradient norm of {history.info.label} grew x{now / base:.3g}, from "
                f"{base:.3g} around step {first_step} to {now:.3g} around step {last_step}"
                f"{_layers_text(layers)}; training is on its way to Inf/NaN",
                _place(history, layers),
                Depth.RUN,
                fix_hint="Clip gradients with `torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "1.0)` before `optimizer.step()`, and lower the learning rate.",
                evidence={
                    "optimizer": history.info.label,
                    "grad_norm_start": base,
                    "grad_norm_end": now,
                    "growth": now / base,
                    "layers": layers,
                },
            )
        )
        return True

    def _vanishing(self, history: _History) -> None:
        if len(history.depth_ratio) < _MIN_SAMPLES:
            return
        window = history.depth_ratio[len(history.depth_ratio) // 3 :]
        ratio = statistics.median(window)
        if sum(r < VANISH_RATIO for r in window) < PERSIST * len(window):
            return  # not persistent
        shares = history.update_share[len(history.update_share) // 3 :]
        share = statistics.median(shares) if shares else None
        if share is not None and share >= LAGGING_UPDATE:
            return  # the earliest layers keep up: the optimizer makes up for the gradient
        if (share is None or share >= NEGLIGIBLE_UPDATE) and self._loss_falls(history) is not False:
            return  # they move a little and the loss falls (or too few losses to tell)
        weights = self._weights[id(history.info)]
        info = history.info
        early = param_name(self.monitor, info, weights[0])
        late = param_name(self.monitor, info, weights[-1])
        moved = (
            ""
            if share is None
            else f"; their relative update is {share:.1e} times that of the latest layers"
        )
        self.emit(
            finding(
                "TD215",
                f"Gradients vanish towards the input: per element, `{early}` gets {ratio:.1e} "
                f"times the gradient of `{late}` (median over the last {len(window)} of "
                f"{len(history.depth_ratio)} sampled steps), so the early layers barely "
                f"learn{moved}{self._loss_text(history)}",
                _place(history, [early]),
                Depth.RUN,
                fix_hint="Use ReLU/GELU instead of sigmoid/tanh in deep stacks, add "
                "normalisation layers or residual connections, and use a "
                "fan-in-scaled initialisation (`nn.init.kaiming_normal_`).",
                evidence={
                    "optimizer": history.info.label,
                    "ratio": ratio,
                    "earliest": early,
                    "latest": late,
                    "update_share": share,
                    "loss_falls": self._loss_falls(history),
                },
            )
        )

    def _loss_ends(self, history: _History) -> tuple[float, float] | None:
        """Medians of the first and the last fifth of the losses whose gradients the
        optimizer consumed (None: too few)."""
        key = id(history.info.optimizer)
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self._losses.curve(key)
        if len(curve) < _MIN_CURVE:
            return None
        width = max(3, len(curve) // 5)
        return statistics.median(curve[:width]), statistics.median(curve[-width:])

    def _loss_falls(self, history: _History) -> bool | None:
        """Whether the optimizer's loss fell clearly from its start to its end (None: too
        few)."""
        ends = self._loss_ends(history)
        if ends is None:
            return None
        first, last = ends
        return last < CONVERGING * first if first > 0 else last < first

    def _loss_text(self, history: _History) -> str:
        ends = self._loss_ends(history)
        if ends is None or self._loss_falls(history):
            return ""
        return f", and the loss does not improve ({ends[0]:.3g} -> {ends[1]:.3g})"


def _depth_ratio(
    info: OptimizerInfo, norms: tuple[float | None, ...], weights: list[int]
) -> float | None:
    """Median RMS gradient of the first quarter of weight matrices over the last quarter."""
    rms = [
        (norms[i] or 0.0) / math.sqrt(info.params[i].numel())
        for i in weights
        if norms[i] is not None
    ]
    if len(rms) < 3:
        return None
    quarter = max(1, len(rms) // 4)
    late = statistics.median(rms[-quarter:])
    return statistics.median(rms[:quarter]) / late if late > 0 else None


def _update_share(ratios: tuple[float | None, ...], weights: list[int]) -> float | None:
    """Median relative update of the first quarter of weight matrices over the last
    quarter's (None where too few were measured or the latest did not move)."""
    measured = [r for i in weights if (r := ratios[i]) is not None and math.isfinite(r)]
    if len(measured) < 3:
        return None
    quarter = max(1, len(measured) // 4)
    late = statistics.median(measured[-quarter:])
    return statistics.median(measured[:quarter]) / late if late > 0 else None


def _fastest_growing(history: _History, monitor: Any) -> list[str]:
    first, last = history.per_param[0][1], history.per_param[-1][1]
    growth = []
    for index, (a, b) in enumerate(zip(first, last, strict=True)):
        if a and b and a > 0:
            growth.append((b / a, param_name(monitor, history.info, index)))
    growth.sort(reverse=True)
    return [name for _, name in growth[:3]]


def _layers_text(layers: list[str]) -> str:
    return "; fastest growing: " + ", ".join(f"`{n}`" for n in layers) if layers else ""


def _place(history: _History, names: list[str]) -> Location:
    obj = names[0] if names else history.info.label
    if history.site is not None:
        return history.site.location(object=obj)
    return Location(object=obj)
