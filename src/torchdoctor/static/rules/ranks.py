"""Recognising rank checks in source: ``if rank == 0:``, ``if is_main_process():``...

Used by the distributed saving rule (TD804) to tell code that runs on one process from
code that runs on every rank. Names are read as words (:func:`torchapi.name_tokens`), so
``local_rank``, ``args.global_rank`` and ``dist.get_rank()`` all name a rank.
"""

from __future__ import annotations

import ast

from torchdoctor.static import torchapi

__all__ = ["is_rank_nonzero", "is_rank_zero", "names_rank"]

_MAIN_WORDS = frozenset({"master", "primary", "leader", "chief"})


def is_rank_zero(test: ast.expr) -> bool:
    """``rank == 0``, ``dist.get_rank() == 0``, ``local_rank in (-1, 0)``,
    ``is_main_process()``, ``accelerator.is_main_process``, ``trainer.is_global_zero``..."""
    if isinstance(test, ast.BoolOp):
        return any(is_rank_zero(value) for value in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return is_rank_nonzero(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, ast.Eq):
            return (_is_zero(right) and names_rank(left)) or (
                _is_zero(left) and names_rank(right))
        if isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            return names_rank(left) and any(_is_zero(e) for e in right.elts)
        if isinstance(op, (ast.LtE, ast.Lt)):
            return names_rank(left) and isinstance(right, ast.Constant) and \
                right.value in ((0,) if isinstance(op, ast.LtE) else (1,))
        return False
    return _names_main_process(test)


def is_rank_nonzero(test: ast.expr) -> bool:
    """``rank != 0``, ``rank > 0``, ``if rank:``, ``not is_main_process()``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return is_rank_zero(test.operand)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(is_rank_nonzero(value) for value in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, ast.NotEq):
            return (_is_zero(right) and names_rank(left)) or (
                _is_zero(left) and names_rank(right))
        if isinstance(op, (ast.Gt, ast.GtE)):
            return names_rank(left) and isinstance(right, ast.Constant) and \
                right.value in ((0,) if isinstance(op, ast.Gt) else (1,))
        return False
    return isinstance(test, (ast.Name, ast.Attribute, ast.Call)) and names_rank(test) \
        and not _names_main_process(test)


def _is_zero(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == 0 and expr.value is not False


def _words(expr: ast.expr) -> list[str]:
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Subscript):  # os.environ["RANK"]
        key = expr.slice
        return torchapi.name_tokens(key.value) if isinstance(key, ast.Constant) and isinstance(
            key.value, str) else []
    if isinstance(expr, ast.Name):
        return torchapi.name_tokens(expr.id)
    if isinstance(expr, ast.Attribute):
        return torchapi.name_tokens(expr.attr)
    return []


def names_rank(expr: ast.expr) -> bool:
    """``rank``, ``args.local_rank``, ``dist.get_rank()``, ``int(os.environ["RANK"])``."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.args \
            and expr.func.id == "int":
        expr = expr.args[0]
    return "rank" in _words(expr)


def _names_main_process(expr: ast.expr) -> bool:
    words = set(_words(expr))
    return bool(words & _MAIN_WORDS) or ("main" in words and len(words) > 1) or (
        "zero" in words and bool(words & {"rank", "global"}))
