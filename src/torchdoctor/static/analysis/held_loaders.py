"""Where a loader (or sampler) held by a name is iterated, across the functions of a file.

A trainer class builds its DataLoader, and the sampler inside it, once in ``__init__``
and keeps it on ``self``; its epoch loop lives in ``fit()`` and iterates the loader in
another method (``self._run_epoch(epoch)``). A script builds the loader at module level
and its ``train_one_epoch()`` iterates the global. :func:`reaches_through_calls` tells
whether an epoch loop reaches such a loader through the calls it makes: methods of the
same class for ``self.x`` names, module-level functions for module-level names. TD801
asks it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.loops import names_bound_in, trains
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope, Item, Loop

__all__ = ["mentions", "reaches_through_calls"]

_MAX_CALLS = 3  # calls followed from the epoch loop down to the loop over the data


def mentions(node: ast.AST, names: list[str]) -> bool:
    """Whether the code under ``node`` refers to one of the variables ``names``
    (plain names, or dotted ones such as ``self.loader``)."""
    plain = {n for n in names if "." not in n}
    dotted = {n for n in names if "." in n}
    last_parts = {n.rpartition(".")[2] for n in dotted}
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in plain:
            return True
        if (
            isinstance(child, ast.Attribute)
            and child.attr in last_parts
            and ast.unparse(child) in dotted
        ):
            return True
    return False


def reaches_through_calls(
    ctx: FileContext, loop: Loop, own: FunctionScope | None, names: list[str]
) -> bool:
    """Whether ``loop`` calls (directly, or through up to :data:`_MAX_CALLS` calls) a
    function whose own training loop uses one of ``names``, the variables that hold the
    loader and were bound in ``own`` (``None``: at module level).

    ``self.x`` names are followed into methods of ``own``'s class only, plain names of
    module level into module-level functions that do not bind them. ``False`` when a
    call on the way hands the instance to code the file does not show (a callback may
    do what the loop seems to lack)."""
    accept: Callable[[FunctionScope], bool]
    if own is None:
        wanted = [n for n in names if "." not in n]

        def accept(function: FunctionScope) -> bool:
            bound = names_bound_in(function.node) | function.parameter_names
            return function.owner is None and function.parent is None and not bound & set(wanted)

        instance = None
    elif own.owner is not None and own.self_name == "self":
        cls = own.owner
        wanted = [n for n in names if n.startswith("self.")]

        def accept(function: FunctionScope) -> bool:
            return function.owner is cls and function.self_name == "self"

        instance = f"<local>.{cls.name}"
    else:
        return False
    if not wanted:
        return False
    seen: set[int] = set()
    reached = False
    frontier: list[tuple[list[Item], Scope]] = [(loop.items, loop.function)]
    for _ in range(_MAX_CALLS):
        following: list[tuple[list[Item], Scope]] = []
        for items, scope in frontier:
            for item in items:
                call = item.node
                if not isinstance(call, ast.Call):
                    continue
                callee = called_function(ctx, call, scope)
                if callee is None:
                    if instance is not None and _hands_instance(ctx, call, scope, instance):
                        return False
                    continue
                if id(callee) in seen or not accept(callee):
                    continue
                seen.add(id(callee))
                if any(
                    trains(ctx, inner) and mentions(inner.node, wanted) for inner in _loops(callee)
                ):
                    reached = True
                following.append((callee.items, callee))
        frontier = following
    return reached


def _loops(function: FunctionScope) -> Iterator[Loop]:
    stack = list(function.loops)
    while stack:
        loop = stack.pop()
        yield loop
        stack.extend(loop.children)


def _hands_instance(ctx: FileContext, call: ast.Call, scope: Scope, instance: str) -> bool:
    """``hook(self)``, ``callback.on_epoch_start(trainer)``: a call the file cannot follow
    gets the instance that holds the loader."""
    self_name = scope.self_name if isinstance(scope, FunctionScope) else None
    for value in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(value, ast.Starred):
            value = value.value
        if not isinstance(value, ast.Name):
            continue
        if value.id == self_name or ctx.instance_type(value, scope) == instance:
            return True
    return False
