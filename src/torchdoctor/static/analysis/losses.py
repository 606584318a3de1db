"""Calls of the losses lint reasons about, with their input and target arguments.

:func:`loss_calls` finds every call of a known loss in a file (``F.cross_entropy(...)``,
``criterion(...)`` for a criterion bound to ``nn.CrossEntropyLoss()``), once per file; the
activation rules (TD301-TD305), the target-dtype rule (TD104) and the model-output rule ask
it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import cast

from torchdoctor.static.analysis.loss_inputs import argument
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import Frame, Item
from torchdoctor.static.torchapi import LOSS_CLASSES, LOSS_FUNCTIONS, LossKind
from torchdoctor.static.values import constructor_of

__all__ = ["LossCall", "LossKind", "loss_calls"]


@dataclass(frozen=True, slots=True)
class LossCall:
    """One call of a known loss.

    Attributes:
        kind: which loss.
        call: the call node.
        input: the prediction argument, ``None`` when it cannot be found.
        target: the target argument.
        constructor: the ``nn.XLoss(...)`` call a criterion was built from, when seen.
        scope: the function the call is in (``None``: module level).
        frames: the blocks around the call, from the module down.
    """

    kind: LossKind
    call: ast.Call
    input: ast.expr | None
    target: ast.expr | None
    constructor: ast.Call | None
    scope: Scope
    frames: tuple[Frame, ...] = ()


def loss_calls(ctx: FileContext) -> list[LossCall]:
    """Every loss call of the file, in source order. Computed once per file."""
    key = ("loss", "calls")
    cached = ctx.memo.get(key)
    if cached is None:
        found: list[LossCall] = []
        scopes: list[tuple[Scope, list[Item]]] = [(None, ctx.module.items)]
        scopes += [(f, f.items) for f in ctx.module.functions]
        for scope, items in scopes:
            for item in items:
                if isinstance(item.node, ast.Call):
                    call = _loss_call(ctx, item.node, scope, item.frames)
                    if call is not None:
                        found.append(call)
        found.sort(key=lambda c: (c.call.lineno, c.call.col_offset))
        cached = ctx.memo[key] = found
    return cast("list[LossCall]", cached)


def _loss_call(
    ctx: FileContext, call: ast.Call, scope: Scope, frames: tuple[Frame, ...]
) -> LossCall | None:
    func = call.func
    qualified = ctx.qualified_name(func, scope)
    kind = LOSS_FUNCTIONS.get(qualified or "")
    constructor = None
    if kind is None:
        if qualified is not None or not (call.args or call.keywords):
            return None
        if not isinstance(func, (ast.Name, ast.Attribute, ast.Call)):
            return None
        kind = LOSS_CLASSES.get(ctx.instance_type(func, scope) or "")
        if kind is None:
            return None
        constructor = constructor_of(ctx, func, scope)
    return LossCall(
        kind,
        call,
        argument(call, 0, "input"),
        argument(call, 1, "target"),
        constructor,
        scope,
        frames,
    )
