"""Autograd graphs kept alive across steps (TD205), found precisely.

At some ``backward()`` calls the loss's ``grad_fn`` node gets a tiny sentinel object in its
``metadata`` dict; the node owns the dict, so the sentinel lives exactly as long as the
node, and a weak reference to it tells whether the node (and the graph behind it) is still
alive. A loss graph that outlives three more optimizer steps is held by the user's code:
``running_loss += loss``, ``losses.append(loss)``. The holder is then found by walking the
graphs of the tensors in the user's frames, and the line that grows it by reading the
function's source. Memory totals are never used to guess.
"""

from __future__ import annotations

import ast
import sys
import weakref
from dataclasses import dataclass
from types import FrameType
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import BackwardEvent, CallSite, RuntimeDetector, StepEvent

__all__ = ["GraphRetained"]

_KEY = "torchdoctor_sentinel"
_AGE = 3             # optimizer steps a loss graph may outlive its step
_MIN_RETAINED = 3    # retained graphs needed: one kept "best loss" is not a leak
_WALK_LIMIT = 20_000


class _Sentinel:
    __slots__ = ("__weakref__",)


@dataclass(slots=True)
class _Tag:
    ref: weakref.ref[_Sentinel]
    step: int
    site: CallSite


def _tagged_backward(index: int) -> bool:
    return index < 64 and index % 4 == 0 or index % 16 == 0


@detector("TD205", depth=Depth.RUN)
class GraphRetained(RuntimeDetector):
    """Finds loss graphs that stay alive steps after their backward pass."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._young: list[_Tag] = []
        self._retained: list[_Tag] = []
        self._holder: tuple[str, Location] | None = None
        self._emitted = False

    def on_backward(self, event: BackwardEvent) -> None:
        if not _tagged_backward(event.index):
            return
        node = event.loss.grad_fn
        if node is None:
            return
        metadata = getattr(node, "metadata", None)
        if not isinstance(metadata, dict) or _KEY in metadata:
            return
        sentinel = _Sentinel()
        metadata[_KEY] = sentinel
        self._young.append(_Tag(weakref.ref(sentinel), event.global_step, event.site))

    def on_step_end(self, event: StepEvent) -> None:
        now = event.global_step
        young = []
        for tag in self._young:
            if now - tag.step <= _AGE:
                young.append(tag)
            elif tag.ref() is not None:
                self._retained.append(tag)
        self._young = young
        if len(self._retained) >= _MIN_RETAINED and not self._emitted:
            self._emitted = True
            self._holder = _find_holder(sys._getframe(1), self.monitor)
            self._emit(now)

    def on_finish(self, report: Report) -> None:
        if self._emitted:
            alive = [t for t in self._retained if t.ref() is not None]
            if alive:
                self._emit(self.monitor.global_step, alive)

    def _emit(self, now: int, tags: list[_Tag] | None = None) -> None:
        tags = tags if tags is not None else self._retained
        first, site = tags[0].step + 1, tags[0].site
        span = f"{len(tags)} sampled losses from step {first} on are still alive at step {now}"
        if self._holder is not None:
            name, location = self._holder
            message = (f"`{name}` holds the autograd graph of past losses: {span}, so memory "
                       "grows every step (a running total or list of loss tensors)")
        else:
            location = site.location(object="loss")
            message = (f"The loss of `backward()` at {site} stays alive with its autograd "
                       f"graph: {span}; something keeps the tensor (a running total, a "
                       "list), so memory grows every step")
        self.emit(finding(
            "TD205", message, location, Depth.RUN,
            fix_hint="Accumulate `loss.item()` (or `loss.detach()`) instead of the loss "
                     "tensor itself.",
            evidence={"retained_graphs": len(tags), "first_step": first, "at_step": now,
                      "holder": self._holder[0] if self._holder else None},
        ))


def _find_holder(frame: FrameType | None, monitor: Any) -> tuple[str, Location] | None:
    """The user variable whose tensor graph reaches a tagged loss, and the line that grows it."""
    while frame is not None:
        code = frame.f_code
        if monitor.is_user_file(code.co_filename):
            for name, value in list(frame.f_locals.items()):
                if _reaches_tag(value):
                    line = _growing_line(code.co_filename, code.co_firstlineno, name)
                    site = CallSite(code.co_filename, line or frame.f_lineno, code.co_name, True)
                    return name, site.location(object=name)
        frame = frame.f_back
    return None


def _reaches_tag(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return _graph_has_tag(value.grad_fn)
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, torch.Tensor) and _graph_has_tag(v.grad_fn)
                   for v in value[:1000])
    if isinstance(value, dict):
        return any(isinstance(v, torch.Tensor) and _graph_has_tag(v.grad_fn)
                   for v in list(value.values())[:1000])
    return False


def _graph_has_tag(node: Any) -> bool:
    stack: list[Any] = [node]
    seen: set[int] = set()
    while stack and len(seen) < _WALK_LIMIT:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if _KEY in getattr(current, "metadata", {}):
            return True
        stack.extend(edge[0] for edge in getattr(current, "next_functions", ()))
    return False


def _growing_line(path: str, first_line: int, name: str) -> int | None:
    """First line in the function starting at ``first_line`` that grows ``name``."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                node.lineno == first_line or first_line in
                [d.lineno for d in node.decorator_list]):
            scope = node
            break
    lines = [getattr(n, "lineno", 0) for n in ast.walk(scope) if _grows(n, name)]
    return min(lines) if lines else None


def _grows(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.AugAssign):
        return _is_name(node.target, name)
    if isinstance(node, ast.Assign):
        return any(_is_name(t, name) for t in node.targets) and any(
            _is_name(n, name) for n in ast.walk(node.value))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in {"append", "extend", "insert"} and _is_name(
            node.func.value, name)
    return False


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
