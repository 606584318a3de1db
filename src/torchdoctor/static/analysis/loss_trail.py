"""Following a loss through the function that computed it, for rules about where it goes.

:func:`loss_seeds` gives the names ``backward()`` runs on, per function; :func:`trail`
the names of a function that then hold that loss or a number made from it (assignments,
``+=``, ``.append()``); :func:`carries` whether an expression is such a number (the
value's own methods, arithmetic, f-strings, ``float()``, ``sum()``, ``np.mean()``,
``torch.stack()``); :func:`returning_loss` the functions of the file that return it
(``return loss.item()``), so that ``value = self.train_step(x)`` carries it too. Any other
call ends the trail (a metrics object, a reducing helper): the rules built on it stay
quiet when unsure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.analysis.step_sequences import Kind, sequences
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope, Item

__all__ = ["Returning", "carries", "loss_seeds", "returning_loss", "trail"]

Returning = dict[int, tuple[bool, ...]]
"""``id(function)`` -> for each position it returns, whether that carries the loss."""

# Functions that keep a number a number: the trail of the local loss goes through them.
_PASSING_BUILTINS = frozenset(
    {"float", "int", "round", "str", "format", "sum", "max", "min", "abs", "list", "tuple"}
)
_PASSING_QUALIFIED = frozenset(
    {
        "numpy.mean",
        "numpy.average",
        "numpy.sum",
        "statistics.mean",
        "statistics.fmean",
        "math.fsum",
        "torch.stack",
        "torch.cat",
        "torch.tensor",
        "torch.as_tensor",
    }
)


def loss_seeds(ctx: FileContext) -> dict[Scope, set[str]]:
    """The names ``backward()`` runs on, per function (``loss``, ``self.loss``)."""
    seeds: dict[Scope, set[str]] = {}
    for body in sequences(ctx):
        for action in body.actions:
            if action.kind is Kind.BACKWARD and action.target is not None:
                name = _loss_name(ctx, action.target)
                if name:
                    seeds.setdefault(action.scope, set()).add(name)
    return seeds


def _loss_name(ctx: FileContext, target: ast.expr) -> str:
    """``loss`` for ``loss``, ``scaler.scale(loss)``, ``loss / accumulation``."""
    while True:
        if isinstance(target, ast.BinOp):
            target = target.left
        elif (
            isinstance(target, ast.Call)
            and isinstance(target.func, ast.Attribute)
            and target.func.attr == "scale"
            and len(target.args) == 1
        ):
            target = target.args[0]
        else:
            break
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return ctx.segment(target)
    return ""


def returning_loss(ctx: FileContext, seeds: dict[Scope, set[str]]) -> Returning:
    """Functions that return their local loss: ``id(function)`` -> for each returned
    position (one for a plain ``return x``), whether it carries the loss."""
    found: Returning = {}
    for scope, names in seeds.items():
        if not isinstance(scope, FunctionScope):
            continue
        tainted = trail(ctx, scope, scope.items, names, {})
        for item in scope.items:
            node = item.node
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            value = node.value
            elements = value.elts if isinstance(value, ast.Tuple) else [value]
            carried = tuple(carries(ctx, e, scope, tainted) for e in elements)
            if any(carried):
                found[id(scope)] = carried
    return found


def trail(
    ctx: FileContext,
    scope: Scope,
    items: Iterable[Item],
    seeds: set[str],
    returning: Returning,
) -> set[str]:
    """The names of ``scope`` that hold the local loss or a value made from it."""
    tainted = set(seeds)
    items = list(items)
    for _ in range(2):  # twice: a loop can use a name above the line that fills it
        for item in items:
            node = item.node
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets: list[ast.expr] = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                if node.value is None:
                    continue
                carried = _carried(ctx, node.value, scope, tainted, returning)
                for target, holds in _pair(targets, carried):
                    if holds:
                        tainted |= _names(ctx, target)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend", "insert")
                and any(carries(ctx, a, scope, tainted, returning) for a in node.args)
            ):
                tainted |= _names(ctx, node.func.value)
    return tainted


def _carried(
    ctx: FileContext,
    value: ast.expr,
    scope: Scope,
    tainted: set[str],
    returning: Returning,
) -> tuple[bool, ...]:
    """For a right-hand side: whether it (or each element a tuple target unpacks) carries
    the loss."""
    if isinstance(value, ast.Call):
        called = called_function(ctx, value, scope)
        if called is not None and id(called) in returning:
            return returning[id(called)]
    return (carries(ctx, value, scope, tainted, returning),)


def _pair(targets: list[ast.expr], carried: tuple[bool, ...]) -> list[tuple[ast.expr, bool]]:
    out = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)) and len(carried) == len(target.elts) > 1:
            out += list(zip(target.elts, carried, strict=True))
        elif len(carried) == 1:
            out.append((target, carried[0]))
    return out


def _names(ctx: FileContext, target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return {ctx.segment(target)}
    if isinstance(target, ast.Subscript):  # running[0] += loss.item()
        return _names(ctx, target.value)
    return set()


def carries(
    ctx: FileContext,
    expr: ast.expr,
    scope: Scope,
    tainted: set[str],
    returning: Returning | None = None,
) -> bool:
    """Whether ``expr`` evaluates to the local loss or a number made from it (a call of
    a helper in ``returning`` gives it)."""

    def inner(node: ast.expr) -> bool:
        return carries(ctx, node, scope, tainted, returning)

    if isinstance(expr, ast.Name):
        return expr.id in tainted
    if isinstance(expr, ast.Attribute):
        return ctx.segment(expr) in tainted or inner(expr.value)
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and inner(func.value):
            return True  # loss.item(), losses.mean()
        if returning:
            called = called_function(ctx, expr, scope)
            if called is not None and any(returning.get(id(called), ())):
                return True
        passing = (isinstance(func, ast.Name) and func.id in _PASSING_BUILTINS) or (
            ctx.qualified_name(func, scope) in _PASSING_QUALIFIED
        )
        return passing and any(inner(a) for a in expr.args)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return any(inner(g.iter) for g in expr.generators)
    if isinstance(expr, ast.Dict):
        return any(inner(v) for v in expr.values if v is not None)
    if isinstance(expr, ast.Lambda):
        return False
    return any(inner(child) for child in ast.iter_child_nodes(expr) if isinstance(child, ast.expr))
