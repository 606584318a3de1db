"""Which models of a file its optimizers train.

An optimizer built in the file from ``model.parameters()`` (or ``named_parameters()``,
inside a list, a dict of groups, a ``filter``) trains ``model``. Rules that judge a model
as trained (its mode, its gradients) ask :func:`optimized_models` first: a model no
optimizer of the file takes, such as a distillation teacher, is used, not trained.
"""

from __future__ import annotations

import ast

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import method_call, receiver
from torchdoctor.static.context import FileContext
from torchdoctor.static.structure import ModuleScope

__all__ = ["covers", "optimized_models"]


def optimized_models(ctx: FileContext, module: ModuleScope) -> frozenset[str] | None:
    """The text of every model whose parameters an optimizer of this file takes
    (``{"model", "self.student"}``), or ``None`` when the file builds no optimizer or one
    whose parameters it cannot read (``SGD(params)`` with ``params`` made elsewhere)."""
    found: set[str] = set()
    built = False
    for scope, items in module.bodies():
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call) or not (node.args or node.keywords):
                continue
            qualified = ctx.qualified_name(node.func, scope)
            if qualified is None or not torchapi.in_family(qualified, torchapi.OPTIMIZER):
                continue
            params = node.args[0] if node.args else _keyword(node, "params")
            if isinstance(params, ast.Name):
                bound = ctx.lookup(params, scope)
                params = bound[0].value if bound is not None else None
            roots = [] if params is None else _roots(ctx, params)
            if not roots:
                return None
            built = True
            found.update(roots)
    return frozenset(found) if built else None


def covers(trained: str, model: str) -> bool:
    """Whether training ``trained`` trains (part of) ``model``, or the other way round."""
    return trained == model or trained.startswith(model + ".") or model.startswith(trained + ".")


def _roots(ctx: FileContext, params: ast.expr) -> list[str]:
    return [
        _path(ctx, receiver(node))
        for node in ast.walk(params)
        if method_call(node, "parameters", "named_parameters")
    ]


def _path(ctx: FileContext, expr: ast.expr) -> str:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return "".join(ctx.segment(expr).split())


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)
