"""Where a function of the file is called from inside a loop that trains.

A helper (an early-stopping object's ``__call__``, a trainer's ``validate()``) does its
work on every pass of the loop that calls it: :func:`training_call_sites` gives those
calls, with the loop that trains around each, so that a rule judging what the helper
keeps can ask what the loop does after it. Calls are found in this file only: ``f()``,
``self.f()``, ``obj.f()`` and ``obj(...)`` (``__call__``) on an instance of a class of
the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.loops import enclosing_loops, trains
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope, Item, Loop

__all__ = ["TrainingCall", "training_call_sites"]


@dataclass(frozen=True, slots=True)
class TrainingCall:
    """One call of a function inside a loop that trains."""

    item: Item  # the call's item (its node is the ``ast.Call``)
    scope: Scope  # the function the call is made from (``None``: module level)
    loop: Loop  # the innermost loop around the call that trains

    @property
    def call(self) -> ast.Call:
        node = self.item.node
        assert isinstance(node, ast.Call)
        return node


def training_call_sites(ctx: FileContext, function: FunctionScope) -> list[TrainingCall]:
    """The calls of ``function`` made inside a loop that trains, in file order."""
    table = ctx.memo.get(("training-calls", "by-function"))
    if not isinstance(table, dict):
        table = ctx.memo[("training-calls", "by-function")] = _call_table(ctx)
    sites: list[TrainingCall] = []
    for scope, item in table.get(id(function), []):
        loop = next((lp for lp in enclosing_loops(ctx, item.frames) if trains(ctx, lp)), None)
        if loop is not None:
            sites.append(TrainingCall(item, scope, loop))
    return sites


def _call_table(ctx: FileContext) -> dict[int, list[tuple[Scope, Item]]]:
    """Every call of a function of the file that sits in a loop, by callee."""
    table: dict[int, list[tuple[Scope, Item]]] = {}
    for loop in ctx.module.all_loops:
        if loop.parent is not None:
            continue  # an outer loop's items hold its nested loops' items
        for item in loop.items:
            node = item.node
            if isinstance(node, ast.Call):
                callee = _callee(ctx, node, loop.function)
                if callee is not None and callee is not loop.function:
                    table.setdefault(id(callee), []).append((loop.function, item))
    return table


def _callee(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    found = called_function(ctx, call, scope)
    if found is not None or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return found
    type_name = ctx.instance_type(call.func, scope)  # obj(...) runs obj's __call__
    if type_name is None or not type_name.startswith("<local>."):
        return None
    cls = ctx.local_class(type_name[len("<local>.") :])
    return cls.methods.get("__call__") if cls is not None else None
