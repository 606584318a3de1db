"""Reading a call's parts and editing its arguments, for rules and their fixes.

``f(x, key=value)``: :func:`keyword` finds a keyword argument, :func:`method_call` and
:func:`receiver` read ``opt.step()`` as a method and the object it is called on,
:func:`last_name` the name a callee ends in, :func:`root_name` the one a chain starts
from, :func:`assigned_names` the names an assignment binds, :func:`requires_grad_setting`
what a statement sets ``requires_grad`` of;
:func:`insert_keywords` adds arguments at the end of a call, and :func:`torch_alias` spells
``torch`` the way the file imports it, so that a fix's new text runs in that file.
"""

from __future__ import annotations

import ast
from typing import TypeGuard

from torchdoctor.findings import Edit
from torchdoctor.static.context import FileContext

__all__ = [
    "assigned_names",
    "insert_keywords",
    "keyword",
    "last_name",
    "method_call",
    "receiver",
    "requires_grad_setting",
    "root_name",
    "torch_alias",
    "values_assigned",
]


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    """The keyword argument ``name`` of a call, if given."""
    return next((k for k in call.keywords if k.arg == name), None)


def last_name(expr: ast.AST) -> str:
    """The last name an expression spells: ``opt`` for ``opt``, ``step`` for
    ``self.opt.step``; ``""`` for anything else (a call, a subscript)."""
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return getattr(expr, "id", "")


def root_name(expr: ast.expr) -> str | None:
    """The name an attribute or subscript chain starts from: ``noise`` for ``noise``,
    ``self`` for ``self.noise[0]``; ``None`` when it starts elsewhere (a call)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def assigned_names(statement: ast.AST) -> set[str]:
    """The names an ``=``, ``+=`` or annotated assignment binds (``a, b = ...`` gives
    both); none for any other statement."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        targets = [statement.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def values_assigned(root: ast.AST, name: str) -> list[ast.expr]:
    """The value of every ``... = <value>`` under ``root`` with the plain name ``name``
    among its targets (nested functions and branches included), in walk order."""
    return [
        node.value
        for node in ast.walk(root)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    ]


def requires_grad_setting(statement: ast.AST) -> tuple[ast.expr, bool] | None:
    """``(what, trainable)`` for ``what.requires_grad_(flag)`` (``requires_grad_()``
    turns it on, ``requires_grad=`` too) or ``what.requires_grad = flag``, the flag a
    constant ``True`` or ``False``; ``None`` for anything else."""
    if isinstance(statement, ast.Expr):
        statement = statement.value
    if isinstance(statement, ast.Call) and isinstance(statement.func, ast.Attribute):
        if statement.func.attr != "requires_grad_":
            return None
        flag = (
            statement.args[0]
            if statement.args
            else next(
                (k.value for k in statement.keywords if k.arg == "requires_grad"),
                ast.Constant(True),
            )
        )
        value = statement.func.value
    elif (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Attribute)
        and statement.targets[0].attr == "requires_grad"
    ):
        flag, value = statement.value, statement.targets[0].value
    else:
        return None
    if isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
        return value, flag.value
    return None


def method_call(call: ast.AST, *names: str) -> TypeGuard[ast.Call]:
    """``<receiver>.<name>(...)`` for one of ``names``."""
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in names
    )


def receiver(call: ast.Call) -> ast.expr:
    """The receiver of a method call (``opt`` of ``opt.step()``)."""
    assert isinstance(call.func, ast.Attribute)
    return call.func.value


def torch_alias(ctx: FileContext, near: ast.expr | None = None) -> str | None:
    """The local name bound to the ``torch`` module (``torch``, ``T``), if the file has one."""
    root = near
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and ctx.imports.get(root.id) == "torch":
        return root.id
    if ctx.imports.get("torch") == "torch":
        return "torch"
    return next((name for name, target in ctx.imports.items() if target == "torch"), None)


def insert_keywords(ctx: FileContext, call: ast.Call, text: str) -> Edit:
    """An edit adding ``text`` (``"dtype=torch.float32"``) as the last argument of ``call``."""
    location = ctx.location(call)
    line = location.end_line or location.line or 1
    column = (location.end_column or 1) - 1  # the closing parenthesis
    inside = ctx.segment(call)[:-1].rstrip()
    separator = ", " if call.args or call.keywords else ""
    if separator and inside.endswith(","):
        separator = " "
    return Edit(line, column, line, column, separator + text)
