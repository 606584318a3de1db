"""Parameters meant frozen whose values still change (TD507, values; ``freezing.py`` holds
the BatchNorm-statistics half of the rule).

The invariant: an optimizer step leaves a parameter with ``requires_grad=False`` exactly as
it was. PyTorch's optimizers skip a parameter only when its ``.grad`` is ``None``, not when
it is frozen, so a parameter frozen after it got a gradient (a freeze applied mid-training,
in a callback or a pre-step hook, with ``zero_grad(set_to_none=False)`` keeping a
zero-filled ``.grad``) is still moved by momentum and weight decay at every step.

On sampled steps, the frozen parameters of the stepping optimizer that hold a ``.grad``
(usually none: one pass over the flags) are fingerprinted before the step (a slice of at
most :data:`_SLICE` values, copied) and compared after it; the comparison is read back
without a synchronisation. Policy for correct programs that look alike: a parameter that
was never trainable and gets a fresh, non-zero gradient set by hand (evolution strategies,
hand-written estimators) is updated on purpose and left alone; so is a parameter that is
frozen on some steps only (the comparison needs :data:`_MIN_CHANGES` sampled steps).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter, not_
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import OptimizerInfo, RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.places import describe_params

__all__ = ["FrozenParametersStepped"]

_SLICE = 256  # values compared per parameter
_MIN_CHANGES = 2  # sampled steps at which frozen parameters moved


@dataclass(slots=True)
class _Moved:
    """What is known of one frozen parameter that an optimizer moved."""

    param: Any
    optimizer: OptimizerInfo
    steps: list[int] = field(default_factory=list)
    zero_grad: bool = False


@detector("TD507", depth=Depth.RUN)
class FrozenParametersStepped(RuntimeDetector):
    """Flags parameters with ``requires_grad=False`` that an optimizer step still changes."""

    sampled_hooks = frozenset({"on_step_begin", "on_step_end"})

    def __init__(self) -> None:
        self._trainable: set[int] = set()  # parameters seen with requires_grad=True
        self._before: dict[int, tuple[list[Any], Any]] = {}  # optimizer -> params, slices
        self._moved: dict[int, _Moved] = {}

    def on_step_begin(self, event: StepEvent) -> None:
        params = event.optimizer.params
        # The flags read in C: a frozen parameter in an optimizer is the rare case.
        flags = list(map(_requires_grad, params))
        self._trainable.update(map(id, compress(params, flags)))
        if all(flags):
            return
        frozen = [p for p in compress(params, map(not_, flags)) if _comparable(p)]
        if not frozen:
            return
        torch = _torch()
        with torch.no_grad():
            slices = [_slice(p).clone() for p in frozen]
        self._before[id(event.optimizer.optimizer)] = (frozen, slices)

    def on_step_end(self, event: StepEvent) -> None:
        before = self._before.pop(id(event.optimizer.optimizer), None)
        if before is None:
            return
        params, slices = before
        torch = _torch()
        with torch.no_grad():
            flags = []
            for param, old in zip(params, slices, strict=True):
                flags += [(_slice(param) != old).any(), _all_zero(torch, param.grad)]
            device = params[0].device
            vector = torch.stack([f.reshape(()).float().to(device) for f in flags])
        self.monitor.defer(
            vector, functools.partial(self._compare, params, event.optimizer, event.global_step)
        )

    def _compare(
        self, params: list[Any], optimizer: OptimizerInfo, step: int, values: list[float]
    ) -> None:
        for index, param in enumerate(params):
            changed, zero = values[2 * index] > 0, values[2 * index + 1] > 0
            if not changed or not (zero or id(param) in self._trainable):
                continue  # a fresh gradient set by hand on a never-trained tensor
            moved = self._moved.get(id(param))
            if moved is None:
                moved = self._moved[id(param)] = _Moved(param, optimizer)
            moved.steps.append(step)
            moved.zero_grad = moved.zero_grad or zero

    def on_finish(self, report: Report) -> None:
        moved = [m for m in self._moved.values() if len(m.steps) >= _MIN_CHANGES]
        if not moved:
            return
        text, names = describe_params(self.monitor, [m.param for m in moved])
        labels = sorted({m.optimizer.label for m in moved})
        first = min(m.steps[0] for m in moved)
        stale = any(m.zero_grad for m in moved)
        why = (
            "they kept a zero-filled `.grad` from before they were frozen "
            "(`zero_grad(set_to_none=False)`), and momentum and weight decay act on every "
            "parameter whose `.grad` is not None"
            if stale
            else "they still hold a `.grad`, and an optimizer updates every parameter whose "
            "`.grad` is not None, whatever `requires_grad` says"
        )
        site = self.monitor.optimizer_site(moved[0].optimizer.optimizer)
        location = site.location(object=names[0]) if site else Location(object=names[0])
        self.emit(
            finding(
                "TD507",
                f"{text} have `requires_grad=False` but {', '.join(labels)} still changed "
                f"them at {max(len(m.steps) for m in moved)} sampled steps (first by step "
                f"{first}): {why}. The part meant frozen keeps drifting",
                location,
                Depth.RUN,
                fix_hint="When freezing, also drop the gradient (`p.grad = None`), or zero "
                "gradients with `set_to_none=True`; or remove frozen parameters from the "
                "optimizer.",
                evidence={
                    "parameters": names,
                    "optimizers": labels,
                    "first_step": first,
                    "zero_gradient": stale,
                },
            )
        )


_requires_grad = attrgetter("requires_grad")


def _comparable(param: Any) -> bool:
    return (
        param.grad is not None
        and param.is_floating_point()
        and not param.is_sparse
        and param.numel() > 0
    )


def _all_zero(torch: Any, grad: Any) -> Any:
    """A 0-d tensor: whether ``grad`` is absent or all zeros (a stale, zero-filled one)."""
    if grad is None:
        return torch.ones(())
    if grad.is_sparse or not grad.is_floating_point():
        return torch.zeros((), device=grad.device)
    return grad.count_nonzero() == 0


def _slice(param: Any) -> Any:
    return param.detach().reshape(-1)[:_SLICE]


def _torch() -> Any:
    import torch

    return torch
