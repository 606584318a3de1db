"""Cheap binding tracking: what a name or ``self.attr`` was bound to earlier in a scope.

Tables are built lazily, one per scope (function, class or module), by walking that
scope's *statements* only (never expressions, never nested functions), and cached for the
file. This answers "``opt`` here was bound to ``torch.optim.SGD(...)`` on line 12" without
a data-flow analysis: the latest binding before the use wins, else the first one after it
(a name rebound later in a loop body).
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

__all__ = ["Binding", "BindingKind", "attribute_bindings", "bound_names", "scope_bindings"]


class BindingKind(enum.Enum):
    """How a name got its value."""

    ASSIGN = "assign"  # x = value / x: T = value
    PARAMETER = "parameter"  # def f(x: T = default)
    LOOP_TARGET = "loop"  # for x in ...
    WITH_TARGET = "with"  # with value as x
    DEFINITION = "definition"  # def x / class x
    UNPACKED = "unpacked"  # a, b = f()


@dataclass(slots=True)
class Binding:
    """One binding of a name.

    Attributes:
        kind: how it was bound.
        node: the statement (or ``ast.arg``) that binds it.
        value: the bound expression where there is one (assignment right-hand side,
            ``with`` context expression, parameter default).
        annotation: the annotation of a parameter or annotated assignment.
    """

    kind: BindingKind
    node: ast.AST
    value: ast.expr | None = None
    annotation: ast.expr | None = None

    @property
    def position(self) -> tuple[int, int]:
        """``(line, column)`` of the binding, for ordering."""
        return (getattr(self.node, "lineno", 0), getattr(self.node, "col_offset", 0))


Table = dict[str, list[Binding]]


def scope_bindings(scope: ast.AST) -> Table:
    """Bindings of the names of one scope, in source order per name."""
    table: Table = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        _add_parameters(scope.args, table)
    body = getattr(scope, "body", None)
    body = body if isinstance(body, list) else []
    for statement in _statements(body):
        _bind_statement(statement, table)
    return table


def attribute_bindings(cls: ast.ClassDef) -> dict[str, list[tuple[Binding, ast.AST]]]:
    """``self.attr = value`` bindings of a class, from every method, with their method.

    Methods named ``__init__`` come first so that the constructor's binding is preferred.
    """
    methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    methods.sort(key=lambda m: m.name != "__init__")
    table: dict[str, list[tuple[Binding, ast.AST]]] = {}
    for method in methods:
        args = method.args.posonlyargs + method.args.args
        if not args:
            continue
        self_name = args[0].arg
        for statement in _statements(method.body):
            targets, value, annotation = _assignment_parts(statement)
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == self_name
                ):
                    binding = Binding(BindingKind.ASSIGN, statement, value, annotation)
                    table.setdefault(target.attr, []).append((binding, method))
    return table


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of a body, nested blocks included (the bodies of ``except``
    handlers and ``match`` cases too: a name bound in a fallback still reaches the code
    after it), nested scopes excluded (their ``def``/``class`` statement itself is
    included)."""
    out: list[ast.stmt] = []
    stack = list(reversed(body))
    fields_of = _BLOCK_FIELDS
    while stack:
        statement = stack.pop()
        out.append(statement)
        cls = statement.__class__
        fields = fields_of.get(cls)
        if fields is None:
            fields = _block_fields(cls)
        for name in reversed(fields):
            if name in ("handlers", "cases"):
                for clause in reversed(getattr(statement, name)):
                    stack.extend(reversed(clause.body))
            else:
                stack.extend(reversed(getattr(statement, name)))
    return out


# Per statement class, its fields that hold nested statements; none for definitions.
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {
    ast.FunctionDef: (),
    ast.AsyncFunctionDef: (),
    ast.ClassDef: (),
}


def _block_fields(cls: type) -> tuple[str, ...]:
    fields = getattr(cls, "_fields", ())
    found = _BLOCK_FIELDS[cls] = tuple(
        f for f in ("body", "handlers", "cases", "orelse", "finalbody") if f in fields
    )
    return found


def _add_parameters(args: ast.arguments, table: Table) -> None:
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True)) + list(
        zip(args.kwonlyargs, args.kw_defaults, strict=True)
    )
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            pairs.append((extra, None))
    for arg, default in pairs:
        table.setdefault(arg.arg, []).append(
            Binding(BindingKind.PARAMETER, arg, default, arg.annotation)
        )


def _assignment_parts(
    statement: ast.stmt,
) -> tuple[list[ast.expr], ast.expr | None, ast.expr | None]:
    if isinstance(statement, ast.Assign):
        return statement.targets, statement.value, None
    if isinstance(statement, ast.AnnAssign):
        return [statement.target], statement.value, statement.annotation
    return [], None, None


def _bind_statement(statement: ast.stmt, table: Table) -> None:
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets, value, annotation = _assignment_parts(statement)
        for target in targets:
            _bind_target(target, value, statement, table, annotation)
    elif isinstance(statement, (ast.For, ast.AsyncFor)):
        for name in bound_names(statement.target):
            table.setdefault(name, []).append(Binding(BindingKind.LOOP_TARGET, statement))
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        for item in statement.items:
            if isinstance(item.optional_vars, ast.Name):
                table.setdefault(item.optional_vars.id, []).append(
                    Binding(BindingKind.WITH_TARGET, statement, item.context_expr)
                )
    elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        table.setdefault(statement.name, []).append(Binding(BindingKind.DEFINITION, statement))


def _bind_target(
    target: ast.expr,
    value: ast.expr | None,
    statement: ast.stmt,
    table: Table,
    annotation: ast.expr | None,
) -> None:
    if isinstance(target, ast.Name):
        table.setdefault(target.id, []).append(
            Binding(BindingKind.ASSIGN, statement, value, annotation)
        )
    elif isinstance(target, (ast.Tuple, ast.List)):
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
        if values is not None and len(values) == len(target.elts):
            for sub_target, sub_value in zip(target.elts, values, strict=True):
                _bind_target(sub_target, sub_value, statement, table, None)
            return
        for name in bound_names(target):
            table.setdefault(name, []).append(Binding(BindingKind.UNPACKED, statement, value))


def bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds whole (``a`` and ``b`` in ``a, *b = ...``), not
    those whose attribute or item it sets (``self`` in ``self.losses = []``)."""
    names: list[str] = []
    stack = [target]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            stack.extend(node.elts)
        elif isinstance(node, ast.Starred):
            stack.append(node.value)
    return names
