"""Gradient accumulation that sums micro-batch means (TD618 at run time, whose lint half
reads the ``if (i + 1) % k == 0:`` loop).

The invariant: when ``k > 1`` backward passes accumulate into one optimizer step, the
gradient applied is the mean over the ``k`` micro-batches only if each loss was scaled by
``1/k`` (or the losses are sums normalised once over the whole window). A mean-reduced
loss handed to ``backward()`` as it left the loss function, ``k`` times per step from the
same line, applies ``k`` times the mean gradient: the learning rate is ``k`` times what
was tuned.

What is seen, whatever helper, class or callback arranged the loop:

* the tensor ``backward()`` is called on: its top autograd node is a loss call with
  ``reduction="mean"`` (or a ``mean()``, or a sum of such), with no ``Div``/``Mul``
  above it. A ``GradScaler.scale(loss)`` is looked through (its multiplication is the
  loss scale, not an averaging);
* how many such passes each call path (the ``backward()`` line and the user's frames
  that called it) makes between two optimizer steps.

Policy for correct programs that look alike:

* a loss divided or multiplied by anything (``/ k``, ``/ num_tokens``, a weight) is
  scaled, and never reported; so is a ``reduction="sum"`` loss (a sum over the window is
  what the author chose);
* one pass per line per step (a GAN's real and fake halves, two losses through one
  helper called from two lines) is not accumulation;
* passes with ``retain_graph=True`` (several losses of one forward), passes inside
  ``step(closure)`` (L-BFGS), and windows whose passes end in different output layers
  (one task head per pass: a multi-task sum) are not counted;
* a count that changes from step to step (fewer than 3 windows, or under three quarters
  of them of the same size) is not judged.

Cost: per backward pass of the first ``_COUNTED_WINDOWS`` steps of each call path (8 once
it was seen scaled), a walk up the Python stack to the user's frames and a few attribute
reads of the top autograd nodes; during its first ``_CHECKED_WINDOWS`` steps, a
breadth-first read of at most ``_HEAD_NODES`` autograd nodes to find the output layer.
Then one set lookup per pass. Nothing is read from the device.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import FrameType
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
from torchdoctor.runtime.patches import Patches, after_call

__all__ = ["AccumulatedLossNotScaled", "call_path", "settled_sites", "usual_count"]

_CHECKED_WINDOWS = 4  # steps of each call path whose passes are read in full
_COUNTED_WINDOWS = 64  # steps of each call path counted (8 once a pass was scaled)
_SCALED_WINDOWS = 8
_MIN_WINDOWS = 3  # steps seen before judging
_AGREEMENT = 0.75  # share of windows with the usual count
_HEAD_NODES = 32  # autograd nodes read to find the output layer
_CALLERS = 3  # user frames above the backward line that make a call path
_STACK = 40  # frames read looking for them

# Loss nodes whose ``_saved_reduction`` says how they reduced (1: mean).
_REDUCING_LOSSES = {
    "NllLossBackward0": "nll_loss",
    "NllLoss2DBackward0": "nll_loss",
    "BinaryCrossEntropyBackward0": "binary_cross_entropy",
    "BinaryCrossEntropyWithLogitsBackward0": "binary_cross_entropy_with_logits",
    "MseLossBackward0": "mse_loss",
    "SmoothL1LossBackward0": "smooth_l1_loss",
    "HuberLossBackward0": "huber_loss",
    "SoftMarginLossBackward0": "soft_margin_loss",
    "MultiMarginLossBackward0": "multi_margin_loss",
    "MultilabelMarginLossBackward0": "multilabel_margin_loss",
}
_MEANS = frozenset({"MeanBackward0", "MeanBackward1"})
_SHAPE = frozenset({"ViewBackward0", "SqueezeBackward0", "SqueezeBackward1", "CloneBackward0"})


@dataclass(slots=True)
class _Path:
    """What one call path of ``backward()`` did, step after step."""

    site: CallSite
    pending: int = 0  # passes since the last optimizer step
    windows: Counter[int] = field(default_factory=Counter)
    losses: set[str] = field(default_factory=set)  # how the checked passes reduced
    scaled: bool = False  # a checked pass was scaled (or not a mean): never judged
    heads: set[int] = field(default_factory=set)  # output layers of the current window
    mixed_heads: bool = False


@detector("TD618", depth=Depth.RUN)
class AccumulatedLossNotScaled(RuntimeDetector):
    """Flags ``k`` unscaled mean losses accumulated into each optimizer step."""

    def __init__(self) -> None:
        self._paths: dict[tuple[Any, ...], _Path] = {}
        self._in_step = False
        self._patches = Patches(alive=self.attached)
        self._scaled_by_scaler: int | None = None  # id() of the last GradScaler.scale output
        self._settled: set[int] = set()  # id() of backward sites whose every path is counted
        self._open = False  # a path counted a pass since the last step began

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler is not None:
            self._patches.wrap(scaler, "scale", after_call(self._patches, self._scaled, _ignore))

    def _scaled(self, result: Any, scaler: Any, outputs: Any = None, *args: Any) -> None:
        # A disabled scaler hands the loss back unchanged: nothing to look through then.
        self._scaled_by_scaler = id(result) if result is not outputs else None

    def on_backward(self, event: BackwardEvent) -> None:
        if self._in_step or event.retain_graph or id(event.site) in self._settled:
            return
        key = call_path(event)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = _Path(event.site)
        path.pending += 1
        self._open = True
        if path.scaled or sum(path.windows.values()) >= _CHECKED_WINDOWS or compiling():
            return
        root = getattr(event.loss, "grad_fn", None)
        if (
            root is not None
            and id(event.loss) == self._scaled_by_scaler
            and root.name() == "MulBackward0"
        ):
            root = _first_input(root)  # loss * scale: the loss below it
        reduced = _unscaled_mean(root, 0)
        if reduced is None:
            path.scaled = True
            return
        path.losses.add(reduced)
        path.heads.add(_output_layer(root))

    def on_step_begin(self, event: StepEvent) -> None:
        self._in_step = True
        if not self._open:
            return  # every site settled: no window to close
        self._open = False
        closed = False
        for path in self._paths.values():
            if path.pending:
                path.windows[path.pending] += 1
                if len(path.heads) > 1:
                    path.mixed_heads = True
                path.pending = 0
                path.heads.clear()
                closed = closed or _counted(path)
        if closed:
            self._settled = settled_sites(self._paths.values(), _counted)

    def on_step_end(self, event: StepEvent) -> None:
        self._in_step = False

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        for path in self._paths.values():
            count = usual_count(path.windows)
            if count is None or path.scaled or path.mixed_heads or not path.losses:
                continue
            self._emit(path, count)

    def _emit(self, path: _Path, count: int) -> None:
        loss = " + ".join(sorted(path.losses))
        steps = sum(path.windows.values())
        self.emit(
            finding(
                "TD618",
                f"`backward()` at {path.site} runs {count} times per optimizer step (in "
                f"{path.windows[count]} of {steps} steps) on a mean-reduced `{loss}` that "
                f"is never divided by {count}: the accumulated gradient is the sum of "
                f"{count} micro-batch means, so each step is {count} times the mean "
                f"gradient, as if the learning rate were {count} times larger",
                path.site.location(object=loss),
                Depth.RUN,
                fix_hint=f"Divide the loss by the number of accumulation steps before "
                f"backward(): `(loss / {count}).backward()`.",
                evidence={
                    "accumulation": count,
                    "loss": loss,
                    "steps_seen": steps,
                    "steps_with_that_count": path.windows[count],
                },
            )
        )


def _ignore(error: BaseException) -> None:
    """A failure in the ``GradScaler.scale`` callback only loses the look-through."""


def _counted(path: _Path) -> bool:
    """Whether a path has been watched long enough to be judged without more passes."""
    seen = sum(path.windows.values())
    return seen >= (_SCALED_WINDOWS if path.scaled else _COUNTED_WINDOWS)


def settled_sites(paths: Iterable[Any], counted: Callable[[Any], bool]) -> set[int]:
    """``id()`` of the backward sites whose every call path is counted: their later
    passes are not looked at (a call path first seen after that is not either)."""
    sites: dict[int, bool] = {}
    for path in paths:
        sites[id(path.site)] = sites.get(id(path.site), True) and counted(path)
    return {site for site, done in sites.items() if done}


def usual_count(windows: Counter[int]) -> int | None:
    """The number of passes most steps accumulate, when it is above 1 and steady."""
    total = sum(windows.values())
    if total < _MIN_WINDOWS:
        return None
    count, times = windows.most_common(1)[0]
    return count if count > 1 and times >= _AGREEMENT * total else None


def call_path(event: BackwardEvent) -> tuple[Any, ...]:
    """The ``backward()`` line and the user's frames that led to it: a helper called from
    two lines (a GAN's two halves) makes two paths; a step called in a loop makes one.
    Found once per backward pass, for every detector that asks."""
    global _last_path
    if _last_path[0] == event.index and _last_path[1] is event.site:
        return _last_path[2]
    site = event.site
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_STACK):
        if frame is None:
            break
        # the file first: a line number is decoded from the code's table, a name is not
        if frame.f_code.co_filename == site.path and frame.f_lineno == site.line:
            break
        frame = frame.f_back
    else:
        frame = None  # not found near the top of the stack: the line alone
    callers: list[Any] = [site]
    frame = frame.f_back if frame is not None else None
    while frame is not None and len(callers) <= _CALLERS:
        callers.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    if len(callers) == 1:
        return (site,)
    _last_path = (event.index, site, tuple(callers))
    return _last_path[2]


_last_path: tuple[int, Any, tuple[Any, ...]] = (-1, None, ())


def _first_input(node: Any) -> Any:
    edges = node.next_functions
    return edges[0][0] if edges else None


def _unscaled_mean(node: Any, depth: int) -> str | None:
    """The loss a mean-reduced, unscaled backward root came from (``None``: anything else:
    a scaled, summed or unknown value)."""
    for _ in range(4):  # a reshaped or cloned scalar is the same value
        if node is None or node.name() not in _SHAPE:
            break
        node = _first_input(node)
    if node is None:
        return None
    name = node.name()
    if name in _REDUCING_LOSSES:
        reduction = getattr(node, "_saved_reduction", None)
        return _REDUCING_LOSSES[name] if reduction == 1 else None
    if name in _MEANS:
        return "mean()"
    if name == "AddBackward0" and depth < 2:  # two mean losses added, unscaled
        parts = [_unscaled_mean(edge, depth + 1) for edge, _ in node.next_functions]
        if len(parts) == 2 and all(parts):
            return " + ".join(p for p in parts if p)
    return None


def _output_layer(root: Any) -> int:
    """Identity of the first parameter reached from the loss: its output layer."""
    frontier, seen = [root], 0
    while frontier and seen < _HEAD_NODES:
        node = frontier.pop(0)
        if node is None:
            continue
        seen += 1
        variable = getattr(node, "variable", None)
        if variable is not None:
            return id(variable)
        frontier.extend(edge for edge, _ in node.next_functions)
    return 0
