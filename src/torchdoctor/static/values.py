"""Following a value back to the expression that made it.

:func:`bound_value` steps from a name or ``self.x`` to the expression assigned to it (or
unpacked into it from ``make()``); :func:`constructor_of` keeps stepping, through
``.to()``/``.cuda()``, to the constructor call a value was built from.
"""

from __future__ import annotations

import ast

from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import conditional
from torchdoctor.static.context import FileContext, Scope

__all__ = ["bound_value", "constructor_of"]

_MAX_DEPTH = 6


def constructor_of(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.Call | None:
    """The constructor call a value was built from (through names, ``self.x``, ``.to()``)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(expr, ast.Call):
            func = expr.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in ("to", "cuda", "cpu")
                and ctx.qualified_name(func, scope) is None
            ):
                expr = func.value
                continue
            return expr
        source = bound_value(ctx, expr, scope)
        if source is None:
            return None
        expr, scope = source
    return None


def bound_value(ctx: FileContext, expr: ast.expr, scope: Scope) -> tuple[ast.expr, Scope] | None:
    """The expression a name or ``self.x`` was assigned (or unpacked from ``make()``).

    ``None`` when the assignment may not have run where the name is used: an assignment in
    an ``if``/loop/``try`` that does not also hold the use (``if not self.training: x =
    softmax(x)`` before ``return x``) leaves the value undecided.
    """
    if isinstance(expr, ast.Name):
        found = ctx.lookup(expr, scope)
        if found is not None and conditional(ctx, found[0].node, expr, found[1]):
            return None
        if found is not None and found[0].kind is BindingKind.UNPACKED:
            return ctx.unpacked_source(expr.id, found[0], found[1])
    elif isinstance(expr, ast.Attribute):
        found = ctx.attribute_binding(expr, scope)
    else:
        return None
    if found is None or found[0].kind is not BindingKind.ASSIGN or found[0].value is None:
        return None
    return found[0].value, found[1]
