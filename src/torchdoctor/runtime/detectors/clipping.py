"""Gradient clipping that takes effect (TD616, TD617 at run time).

The invariant: a ``clip_grad_norm_`` call clips gradients that an optimizer step is
about to consume. Two ways real code breaks it, whatever helper or trainer class makes
the call:

* the call comes after ``optimizer.step()`` and before the next ``backward()``: it
  scales gradients that were already applied and are about to be cleared (TD616);
* the call receives no parameters at all, because the iterable it was given is a
  ``model.parameters()`` generator that the optimizer already drained (TD617).

How the call is seen: ``clip_grad_norm_`` hands the parameter list it built, the
``max_norm`` and the total norm to ``torch.nn.utils.clip_grad._clip_grads_with_norm_``,
looked up as a module global at each call. That private function is wrapped while the
run is watched (the user-facing function, its frames and its warnings are untouched) and
restored at the end; a torch without it switches this detector off. Cost: a Python call
and two integer comparisons per clip.
"""

from __future__ import annotations

import functools
import importlib
import math
import weakref
from collections import Counter
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    CallSite,
    MonitorView,
    RuntimeDetector,
    StepEvent,
)
from torchdoctor.runtime.detectors.loss_nodes import compiling

__all__ = ["ClippingTakesEffect"]

MIN_CLIPS = 3  # clips of one kind before they make a finding
_MODULE = "torch.nn.utils.clip_grad"
_FUNCTION = "_clip_grads_with_norm_"


@detector("TD616", "TD617", depth=Depth.RUN)
class ClippingTakesEffect(RuntimeDetector):
    """Flags clips that run after the step, and clips that receive no parameters."""

    def __init__(self) -> None:
        self._backward_seen = False
        self._stepped = False  # a step ran since the last backward
        self._after_step: Counter[CallSite] = Counter()
        self._in_time = 0
        self._empty: Counter[CallSite] = Counter()
        self._filled: Counter[CallSite] = Counter()
        self._patch: tuple[Any, Any, Any] | None = None

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        module = importlib.import_module(_MODULE)
        original = getattr(module, _FUNCTION, None)
        if original is None:
            return
        seen = weakref.WeakMethod(self._clipped)

        @functools.wraps(original)
        def clip(parameters: Any, max_norm: Any, *args: Any, **kwargs: Any) -> Any:
            callback = None if compiling() else seen()
            if callback is not None:
                try:
                    callback(parameters, max_norm)
                except Exception:  # noqa: BLE001 - never into the user's clip call
                    self._unpatch()
            return original(parameters, max_norm, *args, **kwargs)

        setattr(module, _FUNCTION, clip)
        self._patch = (module, original, clip)

    def on_backward(self, event: BackwardEvent) -> None:
        self._backward_seen, self._stepped = True, False

    def on_step_end(self, event: StepEvent) -> None:
        self._stepped = True

    def _clipped(self, parameters: Any, max_norm: Any) -> None:
        site = self.monitor.user_site()
        if site is None:
            return
        count = len(parameters) if isinstance(parameters, (list, tuple)) else 1
        if count == 0:
            self._empty[site] += 1
            return
        self._filled[site] += 1
        if not _finite(max_norm) or not self._backward_seen:
            return  # a norm read for logging (max_norm=inf), or before any backward
        if self._stepped:
            self._after_step[site] += 1
        else:
            self._in_time += 1

    def on_finish(self, report: Report) -> None:
        self._unpatch()
        if not self._in_time:
            for site, count in self._after_step.items():
                if count >= MIN_CLIPS:
                    self._emit_after_step(site, count)
        for site, count in self._empty.items():
            if count >= MIN_CLIPS and not self._filled[site]:
                self._emit_empty(site, count)

    def _unpatch(self) -> None:
        if self._patch is None:
            return
        module, original, clip = self._patch
        if getattr(module, _FUNCTION, None) is clip:  # restore only what is still ours
            setattr(module, _FUNCTION, original)
        self._patch = None

    def _emit_after_step(self, site: CallSite, count: int) -> None:
        self.emit(
            finding(
                "TD616",
                f"`clip_grad_norm_` at {site} ran {count} times after `optimizer.step()` "
                "and before the next `backward()`: it clips gradients the step already "
                "applied and that are about to be cleared, so no update is ever clipped",
                site.location(object="clip_grad_norm_"),
                Depth.RUN,
                fix_hint="Call `clip_grad_norm_` between `loss.backward()` and `optimizer.step()`.",
                evidence={"clips_after_step": count},
            )
        )

    def _emit_empty(self, site: CallSite, count: int) -> None:
        self.emit(
            finding(
                "TD617",
                f"`clip_grad_norm_` at {site} received no parameters in {count} calls: the "
                "iterable it is given is empty, typically a `model.parameters()` "
                "generator stored once and already drained by the optimizer, so nothing "
                "is ever clipped",
                site.location(object="clip_grad_norm_"),
                Depth.RUN,
                fix_hint="Pass `model.parameters()` afresh at each call, or store "
                "`list(model.parameters())`.",
                evidence={"empty_clips": count},
            )
        )


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True
