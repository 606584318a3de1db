"""Gradient clipping that takes effect (TD616, TD617 at run time).

The invariant: a ``clip_grad_norm_`` call clips gradients that an optimizer step is
about to consume. Two ways real code breaks it, whatever helper or trainer class makes
the call:

* the call comes after ``optimizer.step()`` and before the next ``backward()``: it
  scales gradients that were already applied and are about to be cleared (TD616);
* the call receives no parameters at all, because the iterable it was given is a
  ``model.parameters()`` generator that the optimizer already drained (TD617);
* with a ``GradScaler``, the call comes before ``scaler.unscale_(optimizer)``: it clips
  gradients still multiplied by the loss scale, so the threshold is divided by that scale
  (TD608). Seen from the scaler's own record: the loss was scaled since the last step and
  the optimizer holding the clipped parameters is not in its "unscaled" stage.

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

from torchdoctor._kernel import raised_by_signal_handler
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
from torchdoctor.runtime.patches import Patches, after_call, before_call

__all__ = ["ClippingTakesEffect"]

MIN_CLIPS = 3  # clips of one kind before they make a finding
_MODULE = "torch.nn.utils.clip_grad"
_FUNCTION = "_clip_grads_with_norm_"


@detector("TD608", "TD616", "TD617", depth=Depth.RUN)
class ClippingTakesEffect(RuntimeDetector):
    """Flags clips that run after the step, clips that receive no parameters, and clips
    of gradients a GradScaler has not unscaled."""

    def __init__(self) -> None:
        self._backward_seen = False
        self._stepped = False  # a step ran since the last backward
        self._after_step: Counter[CallSite] = Counter()
        self._in_time = 0
        self._empty: Counter[CallSite] = Counter()
        self._filled: Counter[CallSite] = Counter()
        self._patch: tuple[Any, Any, Any] | None = None
        self._patches = Patches(alive=self.attached)
        self._scaler: weakref.ref[Any] | None = None  # the scaler that scaled since the step
        self._still_scaled: Counter[tuple[CallSite, str]] = Counter()  # (site, clip)
        self._owners: dict[int, Any] = {}  # id(param) -> its optimizer
        self._owners_of = 0  # how many optimizers _owners was built from

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler is not None:
            self._patches.wrap(scaler, "scale", after_call(self._patches, self._scaled, _drop))
        # clip_grad_value_ has no inner function to see its parameters through; it is looked
        # up on its module at each ``torch.nn.utils.clip_grad_value_(...)`` call.
        for module in (torch.nn.utils, importlib.import_module(_MODULE)):
            if hasattr(module, "clip_grad_value_"):
                by_value = before_call(self._patches, self._clipped_by_value, _drop)
                self._patches.wrap(module, "clip_grad_value_", by_value)
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
                except Exception as error:  # noqa: BLE001 - never into the user's clip call
                    if raised_by_signal_handler(error):
                        raise
                    self._unpatch()
            return original(parameters, max_norm, *args, **kwargs)

        setattr(module, _FUNCTION, clip)
        self._patch = (module, original, clip)

    def on_backward(self, event: BackwardEvent) -> None:
        self._backward_seen, self._stepped = True, False

    def on_step_end(self, event: StepEvent) -> None:
        self._stepped = True
        self._scaler = None

    def _scaled(self, result: Any, scaler: Any, outputs: Any = None, *args: Any) -> None:
        if result is not outputs:  # a disabled scaler hands the loss back unchanged
            self._scaler = weakref.ref(scaler)

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
        if self._scaled_gradients(parameters):
            self._still_scaled[site, "clip_grad_norm_"] += 1
        if self._stepped:
            self._after_step[site] += 1
        else:
            self._in_time += 1

    def _clipped_by_value(self, parameters: Any, *args: Any, **kwargs: Any) -> None:
        site = self.monitor.user_site()
        if site is not None and self._backward_seen and not self._stepped:
            listed = parameters if isinstance(parameters, (list, tuple)) else None
            if self._scaled_gradients(listed):
                self._still_scaled[site, "clip_grad_value_"] += 1

    def _scaled_gradients(self, parameters: Any) -> bool:
        """Whether the scaler that scaled this step's loss has not unscaled the gradients
        of the optimizer holding ``parameters``."""
        scaler = self._scaler() if self._scaler is not None else None
        if scaler is None:
            return False
        states = getattr(scaler, "_per_optimizer_states", {})
        if not parameters:  # a generator it cannot read: every optimizer must be unscaled
            return not any(_stage(state) != "READY" for state in states.values())
        optimizers = self.monitor.optimizers
        if len(optimizers) != self._owners_of:
            self._owners = {id(p): info.optimizer for info in optimizers for p in info.params}
            self._owners_of = len(optimizers)
        optimizer = self._owners.get(id(parameters[0]))
        if optimizer is None:
            return False
        return _stage(states.get(id(optimizer))) == "READY"  # not UNSCALED, not STEPPED

    def on_finish(self, report: Report) -> None:
        self._unpatch()
        self._patches.remove()
        for (site, clip), count in self._still_scaled.items():
            if count >= MIN_CLIPS:
                self._emit_still_scaled(site, clip, count)
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

    def _emit_still_scaled(self, site: CallSite, clip: str, count: int) -> None:
        self.emit(
            finding(
                "TD608",
                f"`{clip}` at {site} ran {count} times on gradients the GradScaler had not "
                "unscaled: they are still multiplied by the loss scale (65536 at the start), "
                "so the clipping threshold is effectively divided by that scale and every "
                "update is cut to almost nothing",
                site.location(object=clip),
                Depth.RUN,
                fix_hint="Call `scaler.unscale_(optimizer)` right before clipping, then "
                "`scaler.step(optimizer)` and `scaler.update()` as before.",
                evidence={"scaled_clips": count},
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


def _stage(state: Any) -> str:
    """A GradScaler optimizer state's stage name; ``READY`` when it has none yet."""
    stage = state.get("stage") if isinstance(state, dict) else None
    return str(getattr(stage, "name", "READY"))


def _drop(error: BaseException) -> None:
    """A failure in the ``GradScaler.scale`` callback only loses TD608."""


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True
