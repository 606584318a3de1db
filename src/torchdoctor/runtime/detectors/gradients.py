"""Gradients that are never cleared (TD201) and steps taken without gradients (TD210).

TD201 asks one precise question after a sampled step of an optimizer: between this step
and the next, did any ``backward()`` start from cleared gradients (every ``.grad`` of the
optimizer's parameters ``None`` or exactly zero)? ``zero_grad()`` with either
``set_to_none``, ``model.zero_grad()``, ``p.grad = None`` and in-place zeroing all answer
yes. Gradient accumulation answers yes too (it clears once per step, before its first
micro-batch), and so does a GAN, whose generator's backward passes through the
discriminator before the discriminator's next ``zero_grad()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    CallSite,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
    StepSample,
)
from torchdoctor.runtime.stats import norms

__all__ = ["GradsNeverCleared", "StepWithoutGradients"]

_MIN_WINDOWS = 2  # a verdict needs at least this many uncleared step pairs


@dataclass(slots=True)
class _Window:
    """From a sampled step of an optimizer to its next step."""

    info: OptimizerInfo
    after_step: int
    cleared: bool = False
    checks: list[Any] = field(default_factory=list)  # device scalars: grad norm at backward


@dataclass(slots=True)
class _Tally:
    checked: int = 0
    uncleared: int = 0
    first_uncleared: int | None = None
    site: CallSite | None = None
    norms: list[tuple[int, float]] = field(default_factory=list)


def _site_text(site: CallSite | None) -> str:
    return f" at {site}" if site is not None else ""


@detector("TD201", depth=Depth.RUN)
class GradsNeverCleared(RuntimeDetector):
    """Flags optimizers whose gradients are not cleared between steps."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._windows: dict[int, _Window] = {}
        self._tally: dict[int, _Tally] = {}

    def on_step_end(self, event: StepEvent) -> None:
        if event.sampled and not event.closure:
            self._windows[id(event.optimizer)] = _Window(event.optimizer, event.step)

    def on_backward(self, event: BackwardEvent) -> None:
        for window in self._windows.values():
            if window.cleared or len(window.checks) >= 2:
                continue
            grads = [p.grad for p in window.info.params
                     if p.grad is not None and not p.grad.is_sparse]
            if not grads:
                window.cleared = True
                continue
            torch = _torch()
            with torch.no_grad():
                window.checks.append(norms(torch, grads).sum())

    def on_step_begin(self, event: StepEvent) -> None:
        window = self._windows.pop(id(event.optimizer), None)
        if window is None or (not window.checks and not window.cleared):
            return  # no backward since the last step: TD210's business
        tally = self._tally.setdefault(id(event.optimizer), _Tally())
        if tally.site is None:
            tally.site = self.monitor.user_site()
        if window.cleared:
            tally.checked += 1
            return
        info, step = event.optimizer, event.step

        def verdict(values: list[float]) -> None:
            tally.checked += 1
            if all(v != 0.0 for v in values):
                tally.uncleared += 1
                if tally.first_uncleared is None:
                    tally.first_uncleared = step
                self._maybe_emit(info, tally)

        self.monitor.defer(window.checks, verdict)

    def on_sample(self, sample: StepSample) -> None:
        tally = self._tally.setdefault(id(sample.optimizer), _Tally())
        norms = [n * n for n in sample.grad_norms if n is not None]
        if norms:
            tally.norms.append((sample.step, sum(norms) ** 0.5))

    def _maybe_emit(self, info: OptimizerInfo, tally: _Tally) -> None:
        if tally.uncleared < _MIN_WINDOWS or tally.uncleared * 2 < tally.checked:
            return
        growth = ""
        evidence: dict[str, Any] = {
            "optimizer": info.label, "uncleared_step_pairs": tally.uncleared,
            "checked_step_pairs": tally.checked, "first_uncleared_step": tally.first_uncleared,
        }
        if len(tally.norms) >= 2 and tally.norms[0][1] > 0:
            (first_step, first), (last_step, last) = tally.norms[0], tally.norms[-1]
            growth = (f"; the gradient norm went from {first:.3g} at step {first_step} to "
                      f"{last:.3g} at step {last_step} (x{last / first:.1f})")
            evidence["grad_norm_first"], evidence["grad_norm_last"] = first, last
        location = (tally.site.location(object=info.label) if tally.site is not None
                    else self.monitor.user_location(object=info.label))
        self.emit(finding(
            "TD201",
            f"`optimizer.step()`{_site_text(tally.site)} ({info.label}) ran with the "
            f"gradients of earlier steps still in `.grad`: {tally.uncleared} of "
            f"{tally.checked} checked steps started without clearing them{growth}",
            location, Depth.RUN,
            fix_hint="Call `optimizer.zero_grad()` once per optimizer step, before the "
                     "next `backward()` (for gradient accumulation: right after each "
                     "`step()`).",
            evidence=evidence,
        ))


@detector("TD210", depth=Depth.RUN)
class StepWithoutGradients(RuntimeDetector):
    """Flags ``optimizer.step()`` calls while no parameter holds a gradient."""

    sampled_hooks = frozenset({"on_step_begin"})

    def __init__(self) -> None:
        self._checked: dict[int, int] = {}
        self._none: dict[int, list[int]] = {}
        self._zero: dict[int, list[int]] = {}
        self._site: dict[int, CallSite | None] = {}

    def on_step_begin(self, event: StepEvent) -> None:
        if not event.sampled or event.closure:
            return
        key = id(event.optimizer)
        if key not in self._site:
            self._site[key] = self.monitor.user_site()
        if all(p.grad is None for p in event.optimizer.params):
            self._checked[key] = self._checked.get(key, 0) + 1
            self._none.setdefault(key, []).append(event.step)

    def on_sample(self, sample: StepSample) -> None:
        key = id(sample.optimizer)
        norms = [n for n in sample.grad_norms if n is not None]
        if not norms:
            return  # counted in on_step_begin
        self._checked[key] = self._checked.get(key, 0) + 1
        if all(n == 0.0 for n in norms):
            self._zero.setdefault(key, []).append(sample.step)

    def on_finish(self, report: Any) -> None:
        for info in self.monitor.optimizers:
            key = id(info)
            none, zero = self._none.get(key, []), self._zero.get(key, [])
            bad, checked = len(none) + len(zero), self._checked.get(key, 0)
            if bad >= 2 and bad * 2 >= checked:
                self._emit(info, none, zero, checked)

    def _emit(self, info: OptimizerInfo, none: list[int], zero: list[int],
              checked: int) -> None:
        site = self._site.get(id(info))
        what = ("no parameter had a gradient (every `.grad` was None)" if len(none) >= len(zero)
                else "every gradient was exactly zero")
        steps = sorted(none + zero)
        cause = ("`backward()` did not run before it, or ran on a tensor that does not reach "
                 "these parameters" if len(none) >= len(zero) else
                 "the gradients were cleared between `backward()` and `step()`, or the "
                 "loss does not depend on the parameters")
        location = (site.location(object=info.label) if site is not None
                    else self.monitor.user_location(object=info.label))
        self.emit(finding(
            "TD210",
            f"`optimizer.step()`{_site_text(site)} ({info.label}) ran {len(steps)} of "
            f"{checked} checked times while {what}, first at step {steps[0]}: {cause}. "
            "Those steps change nothing (or only apply weight decay and momentum)",
            location, Depth.RUN,
            fix_hint="Call `loss.backward()` before `optimizer.step()`, and "
                     "`optimizer.zero_grad()` before `backward()`, never between "
                     "`backward()` and `step()`.",
            evidence={"optimizer": info.label, "steps_without_grad": len(none),
                      "steps_with_zero_grad": len(zero), "checked_steps": checked,
                      "first_step": steps[0]},
        ))


def _torch() -> Any:
    import torch

    return torch
