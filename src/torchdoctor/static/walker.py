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
from typing import Any

from torchdoctor.static.blocks import BlockWalker, Handler, Mark
from torchdoctor.static.context import FileContext

__all__ = ["Walker"]

# Fields that never hold nodes, per class (names that hold plain strings/ints); ``ctx``
# (Load/Store) is skipped everywhere. Everything else is scanned for child nodes.
_SCALAR_FIELDS = frozenset(
    {
        "ctx",
        "id",
        "arg",
        "attr",
        "name",
        "module",
        "level",
        "n",
        "s",
        "kind",
        "type_comment",
        "conversion",
        "is_async",
        "simple",
        "asname",
        "tag",
        "kwd_attrs",
        "rest",
        "lineno",  # TypeIgnore's only
    }
)
# Fields that hold operator singletons (``ast.Add()``, ``ast.Lt()``): entered only when a
# rule subscribes to an operator class, which none does.
_OPERATOR_FIELDS = frozenset({"op", "ops"})
_OPERATORS = (ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    ast.Constant: (),
    ast.Import: (),
    ast.ImportFrom: (),
    ast.Global: (),
    ast.Nonlocal: (),
    ast.Name: (),
    ast.MatchSingleton: (),  # its value is None, True or False
}
_RECORDED = frozenset(
    {
        ast.Call,
        ast.Assign,
        ast.AugAssign,
        ast.AnnAssign,
        ast.Return,
        ast.Break,
        ast.Continue,
        ast.Raise,
    }
)
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass})


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _CHILD_FIELDS[cls] = tuple(
            f for f in getattr(cls, "_fields", ()) if f not in _SCALAR_FIELDS
        )
    return fields


class Walker(BlockWalker):
    """Walks one file once, dispatching nodes to subscribed handlers."""

    def __init__(self, ctx: FileContext, *, structure: bool) -> None:
        super().__init__(ctx)
        self.structure = structure
        self.handlers: dict[type, list[Handler]] = {}
        self.call_handlers: dict[str, list[Handler]] = {}
        self._by_name: dict[str, tuple[Handler, ...]] = {}

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
        """Visit the whole module, then fire the scope-end hooks queued during the walk
        (see :meth:`BlockWalker.fire_deferred`) and ``leave_module``.

        The loop is the hot path of lint (every node of every file), so it stays one
        function with its lookups bound to locals; the per-class work is planned once by
        :meth:`_plan`.
        """
        ctx = self.ctx
        handlers = self._start()
        stack = self._stack
        pop, push, mark_type = stack.pop, stack.append, Mark
        # Leaves nobody subscribed to are never pushed: most nodes of a file are names and
        # constants, and skipping them halves the work of the loop below. Fields hold
        # nodes, lists of nodes, or None (scalar fields are never read, see _plan); a
        # value of any other class would be popped and planned as a class without
        # fields or handlers, so no type check is needed here.
        skip = _LEAVES.difference(handlers) | {type(None)}
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
            found, entering, fields = plan
            if found is not None:
                for handler in found:
                    handler(node)
            if entering is not None:
                entering(node)
                continue
            # Children are pushed last field first, each list back to front, so that
            # they pop in source order.
            for field in fields:
                value = getattr(node, field, None)
                if value.__class__ is list:
                    for child in reversed(value):
                        if child.__class__ not in skip:
                            push(child)
                elif value.__class__ not in skip:
                    push(value)
        ctx.walked = self.structure
        self.fire_deferred()
        self._fire("leave_module", ctx.module)

    def release(self) -> None:
        """Drop every subscription too (see :meth:`BlockWalker.release`)."""
        super().release()
        self.handlers.clear()
        self.call_handlers.clear()
        self._by_name = {}

    def _start(self) -> dict[type, tuple[Handler, ...]]:
        """Freeze the subscriptions, visit the module node and push its body."""
        handlers = {cls: tuple(hs) for cls, hs in self.handlers.items()}
        self._by_name = {name: tuple(hs) for name, hs in self.call_handlers.items()}
        for handler in handlers.get(ast.Module, ()):
            handler(self.ctx.tree)
        self._stack.extend(reversed(self.ctx.tree.body))
        return handlers

    def _plan(self, cls: type, handlers: dict[type, tuple[Handler, ...]]) -> tuple[Any, ...]:
        """What to do with every node of a class: the handlers to call (recording first,
        then the rules', then the call dispatch), how to enter it, its child fields."""
        found: list[Handler] = []
        if self.structure and cls in _RECORDED:
            found.append(self._record)
        found.extend(handlers.get(cls, ()))
        if cls is ast.Call and self._by_name:
            found.append(self._dispatch_call)
        entering = self._enter.get(cls)
        if cls in (ast.Import, ast.ImportFrom):
            entering = self.ctx.add_import
        fields = _child_fields(cls)
        if not any(issubclass(c, _OPERATORS) for c in handlers):
            fields = tuple(f for f in fields if f not in _OPERATOR_FIELDS)
        return (tuple(found) or None), entering, fields[::-1]

    def _dispatch_call(self, node: ast.Call) -> None:
        """Call the ``visit_call`` handlers subscribed to the callee's last name."""
        func = node.func
        name: str = func.attr if func.__class__ is ast.Attribute else getattr(func, "id", "")
        by_name = self._by_name.get(name)
        imports = self.ctx.imports
        if by_name is None and name in imports:  # from m import f as g; g()
            by_name = self._by_name.get(imports[name].rpartition(".")[2])
        if by_name is not None:
            for handler in by_name:
                handler(node)
