"""A value rebuilt only once the iterator read before it has run out.

Step-based training reads batches with ``next()`` and builds a new ``DataLoader`` when the
old one is used up: in an ``except StopIteration:`` handler, or after ``next(it, None)``
came back ``None``. Each loader built there is read whole, one pass over the data, however
often the loop around it turns (TD406).
"""

from __future__ import annotations

import ast

from torchdoctor.static.analysis.loops import names_bound_in

__all__ = ["rebuilt_when_exhausted"]


def rebuilt_when_exhausted(body: ast.AST, call: ast.Call) -> bool:
    """Whether the loader is built only once the iterator read before it is used up, so
    each loader is read whole, one pass at a time: in an ``except StopIteration:`` handler
    whose ``try`` reads with ``next()`` a name the handler binds again, or under
    ``if batch is None:`` after ``batch = next(name, None)``, rebinding ``name``."""
    for node in ast.walk(body):
        if isinstance(node, ast.Try):
            read = _next_reads(node.body)
            for handler in node.handlers:
                if _catches_stop_iteration(handler.type) and _rebinds(handler, call, read):
                    return True
        elif isinstance(node, ast.If) and _rebinds(node, call, _exhausted_in(body, node.test)):
            return True
    return False


def _rebinds(block: ast.ExceptHandler | ast.If, call: ast.Call, names: set[str]) -> bool:
    """``block`` (an ``if`` only through its body) holds ``call`` and binds one of ``names``."""
    statements = ast.Module(body=block.body, type_ignores=[])
    return any(n is call for n in ast.walk(statements)) and bool(names & names_bound_in(statements))


def _next_reads(statements: list[ast.stmt]) -> set[str]:
    """Names read by ``next(name)`` in ``statements``."""
    return {
        first.id
        for statement in statements
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "next"
        and node.args
        and isinstance(first := node.args[0], ast.Name)
    }


def _catches_stop_iteration(kind: ast.expr | None) -> bool:
    caught = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(
        isinstance(c, ast.Name)
        and c.id == "StopIteration"
        or isinstance(c, ast.Attribute)
        and c.attr == "StopIteration"
        for c in caught
    )


def _exhausted_in(body: ast.AST, test: ast.expr) -> set[str]:
    """For ``if batch is None:``, the names ``batch = next(name, None)`` reads in ``body``:
    the test holds only once that iterator is used up."""
    if not (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return set()
    result = test.left.id
    names = set()
    for node in ast.walk(body):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == result for t in node.targets)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "next"
            and len(node.value.args) == 2
            and isinstance(node.value.args[0], ast.Name)
            and isinstance(node.value.args[1], ast.Constant)
            and node.value.args[1].value is None
        ):
            names.add(node.value.args[0].id)
    return names
