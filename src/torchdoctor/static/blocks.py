"""How compound statements open and close blocks during the walk, and what they record.

:class:`BlockWalker` is the half of :class:`~torchdoctor.static.walker.Walker` that knows
Python's block structure. Entering a ``def``, ``class``, loop, ``if``, ``with`` or ``try``
pushes its parts onto the walk's stack between *marks*: a mark restores the block context
(``frames``) when it is popped, and the mark that closes a scope queues its ``leave_*``
hooks, which fire once the whole file is recorded. Functions, classes and loops are
recorded on the :class:`FileContext` as they are entered; calls, assignments and jumps are
recorded as :class:`Item` s of their loop and function.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from torchdoctor.static.context import FileContext
from torchdoctor.static.structure import (
    ClassScope,
    Frame,
    FrameKind,
    FunctionScope,
    Item,
    Loop,
)

__all__ = ["SCOPE_HOOKS", "BlockWalker", "Handler", "Mark"]

Handler = Callable[[Any], None]
SCOPE_HOOKS = ("leave_loop", "leave_function", "leave_class", "leave_module")


class Mark:
    """A stack entry that restores the walker's state when popped."""

    __slots__ = ("frames", "on_pop")

    def __init__(self, frames: tuple[Frame, ...], on_pop: Callable[[], None] | None = None) -> None:
        self.frames = frames
        self.on_pop = on_pop


class BlockWalker:
    """Block structure for the walk: the stack, the current loop and class, scope hooks.

    Attributes:
        ctx: the file being walked; its ``frames``, ``function`` and structure are updated.
        leave: scope-end hook name -> handlers to call with the scope.
        loop: the innermost loop being walked (in the current function), if any.
        owner: the class whose body is being walked, if any.
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.leave: dict[str, list[Handler]] = {hook: [] for hook in SCOPE_HOOKS}
        ctx.frames = (ctx.module.frame,)
        self.loop: Loop | None = None
        self.owner: ClassScope | None = None
        self._stack: list[Any] = []
        self._deferred: list[tuple[str, object, tuple[Frame, ...], FunctionScope | None]] = []
        self._enter: dict[type, Callable[[Any], None]] = {
            ast.FunctionDef: self._enter_function,
            ast.AsyncFunctionDef: self._enter_function,
            ast.ClassDef: self._enter_class,
            ast.For: self._enter_for,
            ast.AsyncFor: self._enter_for,
            ast.While: self._enter_while,
            ast.If: self._enter_if,
            ast.With: self._enter_with,
            ast.AsyncWith: self._enter_with,
            ast.Try: self._enter_try,
            ast.ExceptHandler: self._enter_handler,
        }
        try_star = getattr(ast, "TryStar", None)
        if try_star is not None:
            self._enter[try_star] = self._enter_try

    def release(self) -> None:
        """Drop the hooks and the file's scope links once the walk is done (see
        :meth:`~torchdoctor.static.structure.ModuleScope.release`); the hooks are bound
        methods of this walker, a cycle through everything the rules hold."""
        self._enter.clear()
        self.leave.clear()
        self._deferred.clear()
        self._stack.clear()
        self.ctx.module.release()

    def _fire(self, hook: str, scope: object) -> None:
        """Queue a loop's, function's or class's end for :meth:`fire_deferred`; fire
        ``leave_module`` at once (it comes after the walk)."""
        if hook != "leave_module":
            if self.leave[hook]:
                self._deferred.append((hook, scope, self.ctx.frames, self.ctx.function))
            return
        for handler in self.leave[hook]:
            handler(scope)

    def fire_deferred(self) -> None:
        """Fire the scope-end hooks queued during the walk, in the order the scopes
        ended, each with the frames and function it ended in. They run once the whole
        file is recorded because their questions reach past the scope: a loop that
        calls ``self.train_one_batch()`` asks what that method does, and a method
        defined further down the class is recorded only when the walk reaches it."""
        ctx = self.ctx
        queued, self._deferred = self._deferred, []
        for hook, scope, frames, function in queued:
            ctx.frames, ctx.function = frames, function
            for handler in self.leave[hook]:
                handler(scope)
        ctx.frames, ctx.function = (ctx.module.frame,), None

    def _record(self, node: ast.AST) -> None:
        item = Item(node, self.ctx.frames)
        if self.loop is not None:
            self.loop.items.append(item)
        function = self.ctx.function
        (function.items if function is not None else self.ctx.module.items).append(item)

    def _push_exprs(self, nodes: list[Any]) -> None:
        self._stack.extend(reversed([n for n in nodes if isinstance(n, ast.AST)]))

    def _enter_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        ctx = self.ctx
        outer_frames, outer_function, outer_loop = self.ctx.frames, ctx.function, self.loop
        owner = self.owner if outer_frames[-1].kind is FrameKind.CLASS else None
        frame = Frame(FrameKind.FUNCTION, node)
        scope = FunctionScope(node, frame, owner, outer_function)
        ctx.scopes[node] = scope
        ctx.module.functions.append(scope)
        if owner is None:
            ctx.function_index[node.name] = scope
        if owner is not None:
            owner.methods[node.name] = scope

        def leave() -> None:
            ctx.function, self.loop = outer_function, outer_loop
            self._fire("leave_function", scope)

        def enter_body() -> None:
            ctx.function, self.loop = scope, None

        stack = self._stack
        stack.append(Mark(outer_frames, leave))
        stack.extend(reversed(node.body))
        stack.append(Mark(outer_frames + (frame,), enter_body))
        args = node.args
        self._push_exprs(
            [
                *node.decorator_list,
                *args.defaults,
                *args.kw_defaults,
                *(a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)),
                node.returns,
            ]
        )

    def _enter_class(self, node: ast.ClassDef) -> None:
        outer_frames, outer_owner = self.ctx.frames, self.owner
        frame = Frame(FrameKind.CLASS, node)
        scope = ClassScope(node, frame)
        self.ctx.classes[node] = scope
        self.ctx.module.classes.append(scope)
        self.ctx.class_index[node.name] = scope

        def leave() -> None:
            self.owner = outer_owner
            self._fire("leave_class", scope)

        def enter_body() -> None:
            self.owner = scope

        stack = self._stack
        stack.append(Mark(outer_frames, leave))
        stack.extend(reversed(node.body))
        stack.append(Mark(outer_frames + (frame,), enter_body))
        self._push_exprs([*node.decorator_list, *node.bases, *node.keywords])

    def _enter_loop(
        self, node: ast.For | ast.AsyncFor | ast.While, header: list[ast.AST], inside: list[ast.AST]
    ) -> None:
        ctx = self.ctx
        outer_frames, outer_loop = self.ctx.frames, self.loop
        frame = Frame(FrameKind.LOOP, node)
        loop = Loop(node, frame, ctx.function, outer_loop)
        ctx.module.all_loops.append(loop)
        if outer_loop is not None:
            outer_loop.children.append(loop)
        elif ctx.function is not None:
            ctx.function.loops.append(loop)
        else:
            ctx.module.loops.append(loop)

        def leave_loop() -> None:
            self.loop = outer_loop
            if outer_loop is not None:
                outer_loop.items.extend(loop.items)
            self._fire("leave_loop", loop)

        def enter_loop() -> None:
            self.loop = loop

        stack = self._stack
        stack.append(Mark(outer_frames))
        stack.extend(reversed(node.orelse))
        stack.append(Mark(outer_frames, leave_loop))
        stack.extend(reversed(node.body))
        stack.extend(reversed(inside))
        stack.append(Mark(outer_frames + (frame,), enter_loop))
        self._push_exprs(header)

    def _enter_for(self, node: ast.For | ast.AsyncFor) -> None:
        self._enter_loop(node, [node.iter], [node.target])

    def _enter_while(self, node: ast.While) -> None:
        self._enter_loop(node, [], [node.test])

    def _enter_if(self, node: ast.If) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(Mark(outer))
        if node.orelse:
            stack.extend(reversed(node.orelse))
            stack.append(Mark(outer + (Frame(FrameKind.IF_ELSE, node),)))
        stack.extend(reversed(node.body))
        stack.append(Mark(outer + (Frame(FrameKind.IF_BODY, node),)))
        stack.append(node.test)

    def _enter_with(self, node: ast.With | ast.AsyncWith) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(Mark(outer))
        stack.extend(reversed(node.body))
        stack.append(Mark(outer + (Frame(FrameKind.WITH, node),)))
        exprs: list[ast.AST] = []
        for item in node.items:
            exprs.append(item.context_expr)
            if item.optional_vars is not None:
                exprs.append(item.optional_vars)
        self._push_exprs(exprs)

    def _enter_try(self, node: ast.Try) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(Mark(outer))
        stack.extend(reversed(node.finalbody))
        stack.extend(reversed(node.orelse))
        stack.extend(reversed(node.handlers))
        stack.append(Mark(outer))
        stack.extend(reversed(node.body))
        stack.append(Mark(outer + (Frame(FrameKind.TRY, node),)))

    def _enter_handler(self, node: ast.ExceptHandler) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(Mark(outer))
        stack.extend(reversed(node.body))
        stack.append(Mark(outer + (Frame(FrameKind.EXCEPT, node),)))
        if node.type is not None:
            stack.append(node.type)
