"""The single, iterative traversal of one file.

Nodes are visited in source order (pre-order) from an explicit stack, so nesting depth is
bounded by memory, not by the interpreter's recursion limit. Compound statements push
*marks* that restore the block context (``frames``) and fire scope-end hooks once their
bodies have been visited. While it walks, the walker records the file's structure on the
:class:`FileContext`: imports, functions, classes, loops and, when a rule needs them, the
calls and assignments of every loop and function (:class:`Item`).
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

__all__ = ["Walker"]

Handler = Callable[[Any], None]

# Fields that never hold nodes, per class (names that hold plain strings/ints); ``ctx``
# (Load/Store) is skipped everywhere. Everything else is scanned for child nodes.
_SCALAR_FIELDS = frozenset({"ctx", "id", "arg", "attr", "name", "module", "level", "n", "s",
                            "kind", "type_comment", "conversion", "is_async", "simple",
                            "asname", "tag", "kwd_attrs", "rest"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    ast.Constant: (),
    ast.Import: (),
    ast.ImportFrom: (),
    ast.Global: (),
    ast.Nonlocal: (),
    ast.Name: (),
}
_RECORDED = frozenset({ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return,
                       ast.Break, ast.Continue, ast.Raise})
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass})


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _CHILD_FIELDS[cls] = tuple(
            f for f in getattr(cls, "_fields", ()) if f not in _SCALAR_FIELDS)
    return fields


class _Mark:
    """A stack entry that restores the walker's state when popped."""

    __slots__ = ("frames", "on_pop")

    def __init__(self, frames: tuple[Frame, ...], on_pop: Callable[[], None] | None = None
                 ) -> None:
        self.frames = frames
        self.on_pop = on_pop


class Walker:
    """Walks one file once, dispatching nodes to subscribed handlers."""

    def __init__(self, ctx: FileContext, *, structure: bool) -> None:
        self.ctx = ctx
        self.structure = structure
        self.handlers: dict[type, list[Handler]] = {}
        self.call_handlers: dict[str, list[Handler]] = {}
        self.leave: dict[str, list[Handler]] = {hook: [] for hook in
                                                ("leave_loop", "leave_function",
                                                 "leave_class", "leave_module")}
        ctx.frames = (ctx.module.frame,)
        self.loop: Loop | None = None
        self.owner: ClassScope | None = None
        self._stack: list[Any] = []
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

    # --- subscription -------------------------------------------------------------------

    def subscribe(self, node_class: type, handler: Handler) -> None:
        """Call ``handler(node)`` for every node of ``node_class``."""
        self.handlers.setdefault(node_class, []).append(handler)

    def subscribe_call(self, name: str, handler: Handler) -> None:
        """Call ``handler(call)`` for every call whose callee's last name is ``name``."""
        self.call_handlers.setdefault(name, []).append(handler)

    def subscribe_leave(self, hook: str, handler: Handler) -> None:
        """Call ``handler(scope)`` when a scope of the hook's kind ends."""
        self.leave[hook].append(handler)

    # --- the walk -----------------------------------------------------------------------

    def walk(self) -> None:
        """Visit the whole module, then fire ``leave_module``."""
        ctx = self.ctx
        handlers = {cls: tuple(hs) for cls, hs in self.handlers.items()}
        call_handlers = {name: tuple(hs) for name, hs in self.call_handlers.items()}
        stack = self._stack
        for handler in handlers.get(ast.Module, ()):
            handler(ctx.tree)
        stack.extend(reversed(ctx.tree.body))
        pop, extend = stack.pop, stack.extend
        ast_type, mark_type, call_type = ast.AST, _Mark, ast.Call
        # Leaves nobody subscribed to are never pushed: most nodes of a file are names and
        # constants, and skipping them halves the work of the loop below.
        skip = _LEAVES.difference(handlers)
        plans: dict[type, tuple[Any, ...]] = {}
        while stack:
            node = pop()
            cls = node.__class__
            if cls is mark_type:
                ctx.frames = node.frames
                if node.on_pop is not None:
                    node.on_pop()
                continue
            plan = plans.get(cls)
            if plan is None:
                plan = plans[cls] = self._plan(cls, handlers)
            record, found, entering, fields = plan
            if record is not None:
                record(node)
            if found is not None:
                for handler in found:
                    handler(node)
            if cls is call_type and call_handlers:
                func = node.func
                name: str = func.attr if func.__class__ is ast.Attribute else getattr(
                    func, "id", "")
                by_name = call_handlers.get(name)
                if by_name is None and name in ctx.imports:  # from m import f as g; g()
                    by_name = call_handlers.get(ctx.imports[name].rpartition(".")[2])
                if by_name is not None:
                    for handler in by_name:
                        handler(node)
            if entering is not None:
                entering(node)
                continue
            children = []
            for field in fields:
                value = getattr(node, field, None)
                if value.__class__ is list:
                    for child in value:
                        if child.__class__ not in skip and isinstance(child, ast_type):
                            children.append(child)
                elif value.__class__ not in skip and isinstance(value, ast_type):
                    children.append(value)
            if children:
                children.reverse()
                extend(children)
        self._fire("leave_module", ctx.module)

    def _plan(self, cls: type, handlers: dict[type, tuple[Handler, ...]]) -> tuple[Any, ...]:
        """What to do with every node of a class: record, handlers, enter, child fields."""
        record = self._record if self.structure and cls in _RECORDED else None
        entering = self._enter.get(cls)
        if cls in (ast.Import, ast.ImportFrom):
            entering = self.ctx.add_import
        return record, handlers.get(cls), entering, _child_fields(cls)

    def _fire(self, hook: str, scope: object) -> None:
        for handler in self.leave[hook]:
            handler(scope)

    def _record(self, node: ast.AST) -> None:
        item = Item(node, self.ctx.frames)
        if self.loop is not None:
            self.loop.items.append(item)
        function = self.ctx.function
        (function.items if function is not None else self.ctx.module.items).append(item)

    # --- compound statements ------------------------------------------------------------

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
        stack.append(_Mark(outer_frames, leave))
        stack.extend(reversed(node.body))
        stack.append(_Mark(outer_frames + (frame,), enter_body))
        args = node.args
        self._push_exprs([*node.decorator_list, *args.defaults, *args.kw_defaults,
                          *(a.annotation for a in (*args.posonlyargs, *args.args,
                                                   *args.kwonlyargs)), node.returns])

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
        stack.append(_Mark(outer_frames, leave))
        stack.extend(reversed(node.body))
        stack.append(_Mark(outer_frames + (frame,), enter_body))
        self._push_exprs([*node.decorator_list, *node.bases, *node.keywords])

    def _enter_loop(self, node: ast.For | ast.AsyncFor | ast.While,
                    header: list[ast.AST], inside: list[ast.AST]) -> None:
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
        stack.append(_Mark(outer_frames))
        stack.extend(reversed(node.orelse))
        stack.append(_Mark(outer_frames, leave_loop))
        stack.extend(reversed(node.body))
        stack.extend(reversed(inside))
        stack.append(_Mark(outer_frames + (frame,), enter_loop))
        self._push_exprs(header)

    def _enter_for(self, node: ast.For | ast.AsyncFor) -> None:
        self._enter_loop(node, [node.iter], [node.target])

    def _enter_while(self, node: ast.While) -> None:
        self._enter_loop(node, [], [node.test])

    def _enter_if(self, node: ast.If) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(_Mark(outer))
        if node.orelse:
            stack.extend(reversed(node.orelse))
            stack.append(_Mark(outer + (Frame(FrameKind.IF_ELSE, node),)))
        stack.extend(reversed(node.body))
        stack.append(_Mark(outer + (Frame(FrameKind.IF_BODY, node),)))
        stack.append(node.test)

    def _enter_with(self, node: ast.With | ast.AsyncWith) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(_Mark(outer))
        stack.extend(reversed(node.body))
        stack.append(_Mark(outer + (Frame(FrameKind.WITH, node),)))
        exprs: list[ast.AST] = []
        for item in node.items:
            exprs.append(item.context_expr)
            if item.optional_vars is not None:
                exprs.append(item.optional_vars)
        self._push_exprs(exprs)

    def _enter_try(self, node: ast.Try) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(_Mark(outer))
        stack.extend(reversed(node.finalbody))
        stack.extend(reversed(node.orelse))
        stack.extend(reversed(node.handlers))
        stack.append(_Mark(outer))
        stack.extend(reversed(node.body))
        stack.append(_Mark(outer + (Frame(FrameKind.TRY, node),)))

    def _enter_handler(self, node: ast.ExceptHandler) -> None:
        outer = self.ctx.frames
        stack = self._stack
        stack.append(_Mark(outer))
        stack.extend(reversed(node.body))
        stack.append(_Mark(outer + (Frame(FrameKind.EXCEPT, node),)))
        if node.type is not None:
            stack.append(node.type)
