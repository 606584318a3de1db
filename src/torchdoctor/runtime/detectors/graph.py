"""Autograd graphs kept alive across steps, in growing numbers (TD205), found precisely.

At some ``backward()`` calls the loss's ``grad_fn`` node gets a tiny sentinel object in its
``metadata`` dict; the node owns the dict, so the sentinel lives exactly as long as the
node, and a weak reference to it tells whether the node (and the graph behind it) is still
alive. One loss kept for a few steps is normal (``loss_g`` of a GAN lives until the next
generator step, ``best_loss`` until the next improvement); the leak is a *growing* number
of graphs alive at once, held by ``running_loss += loss`` or ``losses.append(loss)``. So
the detector counts, at sampled steps, the tagged graphs alive at the same time that are
older than a few steps, and reports when that count keeps rising. The holder is then found
by walking the graphs of the tensors in the user's frames (and one level into their
objects' attributes), and the line that grows it by reading the function's source. Memory
totals are never used to guess.
"""

from __future__ import annotations

import ast
import collections
import itertools
import sys
import weakref
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import BackwardEvent, CallSite, RuntimeDetector, StepEvent
from torchdoctor.runtime.detectors.scopes import local_items

__all__ = ["GraphRetained"]

_KEY = "torchdoctor_sentinel"
_AGE = 3  # optimizer steps a loss graph may outlive its step
# A few loss variables each holding the last loss of their own loop (a GAN's loss_g and
# loss_d) keep a bounded number of graphs alive; a leak keeps adding to it.
_MIN_HELD = 4  # old graphs alive at the same time
_MIN_RISES = 3  # checks at which that number rose, with no fall in between
_WALK_LIMIT = 20_000
_ATTRIBUTE_LIMIT = 64


class _Sentinel:
    __slots__ = ("__weakref__",)


@dataclass(slots=True)
class _Tag:
    ref: weakref.ref[_Sentinel]
    step: int
    site: CallSite


def _tagged_backward(index: int) -> bool:
    # Every loss early on, so that a leak shows in a short first epoch; sparser later.
    return index < 64 or index % 16 == 0


@detector("TD205", depth=Depth.RUN)
class GraphRetained(RuntimeDetector):
    """Finds loss graphs that pile up: more of them alive at once as training goes on."""

    sampled_hooks = frozenset({"on_step_end"})

    def __init__(self) -> None:
        self._tags: list[_Tag] = []
        self._counts: list[tuple[int, int]] = []  # (step, old graphs alive) while rising
        self._holder: tuple[str, Location] | None = None
        self._emitted = 0

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
        self._tags.append(_Tag(weakref.ref(sentinel), event.global_step, event.site))

    def on_step_end(self, event: StepEvent) -> None:
        now = event.global_step
        self._tags = [t for t in self._tags if t.ref() is not None]
        held = [t for t in self._tags if now - t.step > _AGE]
        if self._counts and len(held) < self._counts[-1][1]:
            self._counts.clear()  # some were freed (a new epoch's running total)
        if not self._counts or len(held) > self._counts[-1][1]:
            self._counts.append((now, len(held)))
        rises = len(self._counts) - 1
        if len(held) >= _MIN_HELD and rises >= _MIN_RISES and not self._emitted:
            self._holder = _find_holder(sys._getframe(1), self.monitor, held[0])
            self._emit(now, held)

    def on_finish(self, report: Report) -> None:
        if self._emitted:
            now = self.monitor.global_step
            held = [t for t in self._tags if t.ref() is not None and now - t.step > _AGE]
            if len(held) > self._emitted:
                self._emit(now, held)

    def _emit(self, now: int, held: list[_Tag]) -> None:
        self._emitted = len(held)
        first, site = held[0].step + 1, held[0].site
        trend = " -> ".join(str(count) for _, count in self._counts[-4:])
        span = (
            f"{len(held)} sampled loss graphs from step {first} on are alive at once at "
            f"step {now}, and their number kept rising ({trend})"
        )
        evidence: dict[str, Any] = {
            "live_graphs": len(held),
            "first_step": first,
            "at_step": now,
            "live_graphs_rising": trend,
        }
        if self._holder is not None:
            name, location = self._holder
            evidence["holder"] = name
            message = (
                f"`{name}` holds the autograd graphs of past losses: {span}, so "
                "memory grows every step (a running total or list of loss tensors)"
            )
        else:
            location = site.location(object="loss")
            message = (
                f"The losses of `backward()` at {site} stay alive with their "
                f"autograd graphs: {span}; something keeps the tensors (a running "
                "total, a list), so memory grows every step"
            )
        self.emit(
            finding(
                "TD205",
                message,
                location,
                Depth.RUN,
                fix_hint="Accumulate `loss.item()` (or `loss.detach()`) instead of the loss "
                "tensor itself.",
                evidence=evidence,
            )
        )


def _find_holder(
    frame: FrameType | None, monitor: Any, oldest: _Tag
) -> tuple[str, Location] | None:
    """The user variable whose tensors reach the oldest held loss graph, and the line that
    grows it (the newest loss reaches its own graph, but holds nothing old)."""
    sentinel = oldest.ref()
    if sentinel is None:
        return None
    while frame is not None:
        code = frame.f_code
        if monitor.is_user_file(code.co_filename):
            found = _holder_in(local_items(frame), sentinel)
            if found is not None:
                line = _growing_line(code.co_filename, code.co_firstlineno, found)
                site = CallSite(code.co_filename, line or frame.f_lineno, code.co_name, True)
                return found, site.location(object=found)
        frame = frame.f_back
    return None


def _holder_in(variables: list[tuple[str, Any]], sentinel: _Sentinel) -> str | None:
    """``name`` or ``name.attribute`` of the first variable that reaches ``sentinel``."""
    for name, value in variables:
        if _reaches(value, sentinel):
            return name
    for name, value in variables:  # a trainer object's `self.losses`
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict) and not isinstance(value, (type, ModuleType)):
            for attribute, inner in list(attributes.items())[:_ATTRIBUTE_LIMIT]:
                if _reaches(inner, sentinel):
                    return f"{name}.{attribute}"
    return None


def _reaches(value: Any, sentinel: _Sentinel, depth: int = 2) -> bool:
    """Whether a tensor, or a container of them (nested twice), reaches the tagged graph."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.grad_fn is not None and _graph_has(value.grad_fn, sentinel)
    if depth == 0 or isinstance(value, (str, bytes)):
        return False
    if isinstance(value, dict):
        value = value.values()
    if isinstance(value, (list, tuple, set, frozenset, collections.deque, type({}.values()))):
        return any(_reaches(v, sentinel, depth - 1) for v in itertools.islice(value, 1000))
    return False


def _graph_has(node: Any, sentinel: _Sentinel) -> bool:
    stack: list[Any] = [node]
    seen: set[int] = set()
    while stack and len(seen) < _WALK_LIMIT:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "metadata", {}).get(_KEY) is sentinel:
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
            node.lineno == first_line or first_line in [d.lineno for d in node.decorator_list]
        ):
            scope = node
            break
    lines = [getattr(n, "lineno", 0) for n in ast.walk(scope) if _grows(n, name)]
    return min(lines) if lines else None


def _grows(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.AugAssign):
        return _is_name(node.target, name)
    if isinstance(node, ast.Assign):
        return any(_is_name(t, name) for t in node.targets) and any(
            _is_name(n, name) for n in ast.walk(node.value)
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in {"append", "extend", "insert"} and _is_name(node.func.value, name)
    return False


def _is_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is the variable ``name`` (or the attribute ``self.history``)."""
    if isinstance(node, ast.Attribute) and "." in name:
        owner, _, attribute = name.rpartition(".")
        return node.attr == attribute and _is_name(node.value, owner)
    return isinstance(node, ast.Name) and node.id == name
