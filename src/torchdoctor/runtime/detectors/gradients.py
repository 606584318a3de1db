"""Gradients that are never cleared (TD201) and steps taken without gradients (TD210).

TD201 asks one precise question about each sampled step of an optimizer: does the next
``step()`` of that same optimizer consume gradients that were already in ``.grad`` at
this step? Only the optimizer's own parameters matter, and only those whose gradient
changed between the two steps (a backward pass reached them). Such a gradient is fresh
when it was seen cleared (``None``, or exactly zero) before one of the backward passes in
between; ``zero_grad()`` with either ``set_to_none``, ``model.zero_grad()``,
``p.grad = None`` and in-place zeroing all count. Backward passes that do not reach the
parameters change nothing, so a WGAN's critic steps between two generator steps, a GAN's
generator backward through the discriminator, and gradient accumulation (cleared once per
step, before its first micro-batch) are all judged correctly.
"""

from __future__ import annotations

import weakref
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
from torchdoctor.runtime.detectors.explains import explained
from torchdoctor.runtime.detectors.places import param_name
from torchdoctor.runtime.stats import norms

__all__ = ["GradsNeverCleared", "StepWithoutGradients"]

_MIN_WINDOWS = 2  # a verdict needs at least this many uncleared step pairs
# Gradient norms taken per window (one per backward pass until every gradient was seen
# cleared): steps further apart than this many backward passes are not judged.
_MAX_CHECKS = 16

# The gradient tensor a parameter held, and its version counter: a backward pass that adds
# into it, in-place zeroing and replacing it all change one or the other.
_Mark = tuple["weakref.ref[Any]", int]


def _mark(grad: Any) -> _Mark | None:
    return None if grad is None else (weakref.ref(grad), _version(grad))


def _unchanged(mark: _Mark | None, grad: Any) -> bool:
    if mark is None or grad is None:
        return mark is None and grad is None
    return mark[0]() is grad and mark[1] == _version(grad)


def _version(grad: Any) -> int:
    try:
        return int(grad._version)
    except RuntimeError:  # inference tensors keep no version counter: identity only
        return -1


@dataclass(slots=True)
class _Window:
    """From a sampled step of an optimizer to its next step, per parameter of it."""

    info: OptimizerInfo
    marks: list[_Mark | None]  # each gradient right after the step
    cleared: list[bool]  # seen None before a backward pass since the step
    backwards: int = 0
    settled: bool = False  # every gradient was seen cleared: nothing left to check
    overflow: bool = False
    checks: list[tuple[list[int], Any]] = field(default_factory=list)  # (params, norms)


@dataclass(slots=True)
class _Tally:
    checked: int = 0
    uncleared: int = 0
    first_uncleared: int | None = None
    stale: list[str] = field(default_factory=list)
    site: CallSite | None = None
    norms: list[tuple[int, float]] = field(default_factory=list)


def _site_text(site: CallSite | None) -> str:
    return f" at {site}" if site is not None else ""


@detector("TD201", depth=Depth.RUN)
class GradsNeverCleared(RuntimeDetector):
    """Flags optimizers whose steps consume gradients left over from their previous step."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._windows: dict[int, _Window] = {}
        self._tally: dict[int, _Tally] = {}

    def on_step_end(self, event: StepEvent) -> None:
        if event.sampled and not event.closure:
            params = event.optimizer.params
            self._windows[id(event.optimizer)] = _Window(
                event.optimizer, [_mark(p.grad) for p in params], [False] * len(params)
            )

    def on_backward(self, event: BackwardEvent) -> None:
        for window in self._windows.values():
            window.backwards += 1
            self._observe(window)

    def _observe(self, window: _Window) -> None:
        """Before a backward pass: which gradients are cleared, and the norms of the rest."""
        if window.settled:
            return
        indices, grads = [], []
        for index, param in enumerate(window.info.params):
            if window.cleared[index]:
                continue
            grad = param.grad
            if grad is None:
                window.cleared[index] = True
            elif not grad.is_sparse and grad.numel():
                indices.append(index)
                grads.append(grad)
        window.settled = not grads
        if not grads or window.overflow:
            return
        if len(window.checks) >= _MAX_CHECKS:
            window.overflow = True
            return
        torch = _torch()
        with torch.no_grad():
            window.checks.append((indices, norms(torch, grads)))

    def on_step_begin(self, event: StepEvent) -> None:
        window = self._windows.pop(id(event.optimizer), None)
        if window is None or not window.backwards:
            return  # no backward since the last step: TD210's business
        params = window.info.params
        touched = [i for i, p in enumerate(params) if not _unchanged(window.marks[i], p.grad)]
        if not touched:
            return  # no backward pass reached this optimizer's parameters
        tally = self._tally.get(id(event.optimizer))
        if tally is None:
            tally = self._tally[id(event.optimizer)] = _Tally()
        if tally.site is None:
            tally.site = self.monitor.user_site()
        checked = {i for indices, _ in window.checks for i in indices}
        suspects = [i for i in touched if not window.cleared[i] and i in checked]
        if not suspects:
            tally.checked += 1
            return
        if window.overflow:
            return  # too many backward passes apart to tell
        info, step, checks = event.optimizer, event.step, window.checks
        vector = _torch().cat([n.to(checks[0][1].device) for _, n in checks])

        def verdict(values: list[float]) -> None:
            zeroed: set[int] = set()
            cursor = 0
            for indices, _ in checks:
                zeroed.update(i for i, v in zip(indices, values[cursor:], strict=False) if v == 0.0)
                cursor += len(indices)
            stale = [i for i in suspects if i not in zeroed]
            tally.checked += 1
            if stale:
                tally.uncleared += 1
                if tally.first_uncleared is None:
                    tally.first_uncleared = step
                    tally.stale = [param_name(self.monitor, info, i) for i in stale[:4]]
                self._maybe_emit(info, tally)

        self.monitor.defer(vector, verdict)

    def on_sample(self, sample: StepSample) -> None:
        tally = self._tally.get(id(sample.optimizer))
        if tally is None:
            tally = self._tally[id(sample.optimizer)] = _Tally()
        norms = [n * n for n in sample.grad_norms if n is not None]
        if norms:
            tally.norms.append((sample.step, sum(norms) ** 0.5))

    def _maybe_emit(self, info: OptimizerInfo, tally: _Tally) -> None:
        if tally.uncleared < _MIN_WINDOWS or tally.uncleared * 2 < tally.checked:
            return
        growth = ""
        evidence: dict[str, Any] = {
            "optimizer": info.label,
            "uncleared_step_pairs": tally.uncleared,
            "checked_step_pairs": tally.checked,
            "first_uncleared_step": tally.first_uncleared,
            "stale_parameters": tally.stale,
        }
        if len(tally.norms) >= 2 and tally.norms[0][1] > 0:
            (first_step, first), (last_step, last) = tally.norms[0], tally.norms[-1]
            growth = (
                f"; the gradient norm went from {first:.3g} at step {first_step} to "
                f"{last:.3g} at step {last_step} (x{last / first:.1f})"
            )
            evidence["grad_norm_first"], evidence["grad_norm_last"] = first, last
        location = (
            tally.site.location(object=info.label)
            if tally.site is not None
            else self.monitor.user_location(object=info.label)
        )
        self.emit(
            finding(
                "TD201",
                f"`optimizer.step()`{_site_text(tally.site)} ({info.label}) ran with the "
                f"gradients of earlier steps still in `.grad`: {tally.uncleared} of "
                f"{tally.checked} checked steps started without clearing them{growth}",
                location,
                Depth.RUN,
                fix_hint="Call `optimizer.zero_grad()` once per optimizer step, before the "
                "next `backward()` (for gradient accumulation: right after each "
                "`step()`).",
                evidence=evidence,
            )
        )


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
        if explained(report, "TD210"):
            return  # a one-class loss, a loss cut from the model, an optimizer of copies
        for info in self.monitor.optimizers:
            key = id(info)
            none, zero = self._none.get(key, []), self._zero.get(key, [])
            bad, checked = len(none) + len(zero), self._checked.get(key, 0)
            if bad >= 2 and bad * 2 >= checked:
                self._emit(info, none, zero, checked)

    def _emit(self, info: OptimizerInfo, none: list[int], zero: list[int], checked: int) -> None:
        site = self._site.get(id(info))
        what = (
            "no parameter had a gradient (every `.grad` was None)"
            if len(none) >= len(zero)
            else "every gradient was exactly zero"
        )
        steps = sorted(none + zero)
        cause = (
            "`backward()` did not run before it, or ran on a tensor that does not reach "
            "these parameters"
            if len(none) >= len(zero)
            else "the gradients were cleared between `backward()` and `step()`, or the "
            "loss does not depend on the parameters"
        )
        location = (
            site.location(object=info.label)
            if site is not None
            else self.monitor.user_location(object=info.label)
        )
        self.emit(
            finding(
                "TD210",
                f"`optimizer.step()`{_site_text(site)} ({info.label}) ran {len(steps)} of "
                f"{checked} checked times while {what}, first at step {steps[0]}: {cause}. "
                "Those steps change nothing (or only apply weight decay and momentum)",
                location,
                Depth.RUN,
                fix_hint="Call `loss.backward()` before `optimizer.step()`, and "
                "`optimizer.zero_grad()` before `backward()`, never between "
                "`backward()` and `step()`.",
                evidence={
                    "optimizer": info.label,
                    "steps_without_grad": len(none),
                    "steps_with_zero_grad": len(zero),
                    "checked_steps": checked,
                    "first_step": steps[0],
                },
            )
        )


def _torch() -> Any:
    import torch

    return torch
