"""What one training iteration does, in order, however the step is split into helpers.

A *body* is the direct items of a loop (nested loops excluded) or the items of a function
outside its loops (a ``train_step()`` method that runs once per call). :func:`sequences`
gives, for each body of the file, its :class:`Action`\\ s in source order —
``backward()``, an optimizer step, ``zero_grad()``, gradient clipping, a scheduler step —
with calls of the file's own functions (``self.optimizer_step()``, ``clip(model)``)
replaced by what those functions do (:func:`~.events.helper_to_follow`). The kinds are
the step view of the training events (:mod:`.events`). Each action keeps the item of the
body it happens through (``site``), so that order and branches are judged in the body.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import constant_arguments
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.events import MAX_CALL_DEPTH, STEP_VIEW, Kind, helper_to_follow
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, Loop
from torchdoctor.static.training import classify

__all__ = ["Action", "Body", "Kind", "sequences"]

_CLIPS = (*torchapi.CLIP_GRAD_NORM, *torchapi.CLIP_GRAD_VALUE)
_WORDS = frozenset(
    {
        "backward",
        "manual_backward",
        "step",
        "zero_grad",
        "zero_",
        "detach_",
        "clip_grad_norm_",
        "clip_grad_value_",
        "clip_grad_norm",
        "grad",
    }
)
_CLIP_NAMES = frozenset({*(name.rpartition(".")[2] for name in _CLIPS), "clip_gradients"})
_LAUNCHERS = frozenset({"accelerator", "self.accelerator", "fabric", "self.fabric"})


@dataclass(frozen=True, slots=True)
class Action:
    """One action of a body.

    Attributes:
        kind: what it does.
        node: the call (or ``p.grad = None`` statement) itself, maybe inside a helper.
        site: the item of the analysed body it runs through (the helper call, or itself).
        target: the optimizer stepped or cleared, the loss ``backward()`` runs on.
        scope: the function ``node`` is in.
        item: the recorded item of ``node`` itself (its frames give the blocks around it
            inside a helper); ``None`` where it is ``site``.
    """

    kind: Kind
    node: ast.AST
    site: Item
    target: ast.expr | None
    scope: Scope
    item: Item | None = None

    @property
    def own_item(self) -> Item:
        """The item of the action itself: inside the helper it happens in, if any."""
        return self.item if self.item is not None else self.site

    @property
    def line(self) -> int:
        """The line of the action itself."""
        return getattr(self.node, "lineno", 0)

    @property
    def through_helper(self) -> bool:
        """Whether the action happens inside a function called from the body."""
        return self.site.node is not self.node


@dataclass(frozen=True, slots=True)
class Body:
    """A loop body or a function body (outside its loops) and its actions."""

    loop: Loop | None
    scope: Scope
    items: tuple[Item, ...]
    actions: tuple[Action, ...]


def sequences(ctx: FileContext) -> list[Body]:
    """Every body of the file with at least one action, loops first. Cached per file."""
    key = ("step-sequences", "bodies")
    cached = ctx.memo.get(key)
    if cached is None:
        bodies = []
        for loop in ctx.module.all_loops:
            items = tuple(i for i in loop.items if loop.is_direct(i))
            bodies.append(_body(ctx, loop, loop.function, items))
        for function in ctx.module.functions:
            items = tuple(i for i in function.items if not _in_loop(i))
            bodies.append(_body(ctx, None, function, items))
        cached = ctx.memo[key] = [b for b in bodies if b.actions]
    return cast("list[Body]", cached)


def _in_loop(item: Item) -> bool:
    for frame in reversed(item.frames):
        if frame.kind is FrameKind.LOOP:
            return True
        if frame.kind is FrameKind.FUNCTION:
            return False
    return False


def _body(ctx: FileContext, loop: Loop | None, scope: Scope, items: tuple[Item, ...]) -> Body:
    actions: list[Action] = []
    for item in items:
        actions += _actions_of(ctx, item, item, scope, 0, set())
    return Body(loop, scope, items, tuple(actions))


def _actions_of(
    ctx: FileContext,
    item: Item,
    site: Item,
    scope: Scope,
    depth: int,
    seen: set[int],
    constants: dict[str, object] | None = None,
) -> list[Action]:
    node = item.node
    if isinstance(node, ast.Call):
        if last_name(node.func) in _CLIP_NAMES and (
            ctx.is_call_to(node, *_CLIPS, scope=scope) or _launcher_clip(ctx, node)
        ):
            target = node.args[0] if node.args else None
            return [Action(Kind.CLIP, node, site, target, scope, _inner(item, site))]
        callee = helper_to_follow(ctx, node, scope, depth, seen)
        callees = [callee] if callee is not None else _hooks_called(ctx, node, constants, depth)
        inner: list[Action] = []
        for called in callees:
            if id(called) in seen:
                continue
            # the event names a dispatch helper is called with (`self._emit("on_x")`)
            passed = constant_arguments(node, called) if _dispatches(called) else None
            for sub in called.items:
                inner += _actions_of(ctx, sub, site, called, depth + 1, seen | {id(called)}, passed)
        if callees:
            return inner
    if not _mentions_a_word(node):
        return []
    event = classify(ctx, item, scope)
    kind = STEP_VIEW.get(event.kind) if event is not None else None
    if event is None or kind is None:
        return []
    return [Action(kind, node, site, event.target, scope, _inner(item, site))]


def _inner(item: Item, site: Item) -> Item | None:
    return None if item is site else item


def _dispatches(function: FunctionScope) -> bool:
    """Whether a function calls ``getattr(obj, name)(...)``: an event dispatcher."""
    return any(
        isinstance(item.node, ast.Call)
        and isinstance(item.node.func, ast.Call)
        and isinstance(item.node.func.func, ast.Name)
        and item.node.func.func.id == "getattr"
        for item in function.items
    )


def _hooks_called(
    ctx: FileContext, call: ast.Call, constants: dict[str, object] | None, depth: int
) -> list[FunctionScope]:
    """The callback methods of the file an event dispatch runs: ``cb.on_batch_end(self)``
    on an object of unknown class, or ``getattr(cb, event)(self)`` in a helper called
    with ``event="on_batch_end"``. Every class of the file with a method of that hook
    name (``on_...``) is taken: a callback list may hold any of them."""
    if depth >= MAX_CALL_DEPTH:
        return []
    func = call.func
    name: object = None
    if (
        isinstance(func, ast.Call)
        and isinstance(func.func, ast.Name)
        and func.func.id == "getattr"
        and len(func.args) >= 2
        and isinstance(func.args[1], ast.Name)
        and constants
    ):
        name = constants.get(func.args[1].id)
    elif isinstance(func, ast.Attribute):
        name = func.attr
    if not isinstance(name, str) or not name.startswith("on_"):
        return []
    return [method for cls in ctx.classes.values() if (method := cls.methods.get(name)) is not None]


def _launcher_clip(ctx: FileContext, call: ast.Call) -> bool:
    """``accelerator.clip_grad_norm_(...)`` / ``fabric.clip_gradients(...)``."""
    func = call.func
    return isinstance(func, ast.Attribute) and ctx.segment(func.value) in _LAUNCHERS


def _mentions_a_word(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        name = last_name(node.func)
        return name in _WORDS or name.endswith("backward")
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets: Iterable[ast.expr] = (
            node.targets if isinstance(node, ast.Assign) else [node.target]
        )
        return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in targets)
    return False


def text_of(ctx: FileContext, expr: ast.expr | None) -> str:
    """A short source text for an action's target (``""`` when there is none)."""
    if expr is None:
        return ""
    text = ctx.segment(expr)
    return text if len(text) <= 40 and "\n" not in text else ""
