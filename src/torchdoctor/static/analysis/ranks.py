"""Recognising rank checks in source: ``if rank == 0:``, ``if is_main_process():``...

Used by the distributed saving rule (TD804) to tell code that runs on one process from
code that runs on every rank. Names are read as words (:func:`torchapi.name_tokens`), so
``local_rank``, ``args.global_rank`` and ``dist.get_rank()`` all name a rank; so does a
variable bound to one (``gpu_id = int(os.environ["LOCAL_RANK"])``) when the caller passes a
``resolve`` function that looks bindings up.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from functools import partial

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.related_files import program_sources
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.files import read_source

__all__ = [
    "Resolve",
    "is_rank_nonzero",
    "is_rank_zero",
    "names_rank",
    "resolver",
    "returns_rank_zero",
    "runs_on_rank_zero_only",
    "true_on_rank_zero_only",
]

Resolve = Callable[[ast.expr], "ast.expr | None"]
"""Gives the value a name or ``self.attr`` was bound to, or ``None``."""

_MAIN_WORDS = frozenset({"master", "primary", "leader", "chief"})
# Per-process indices that equal the rank on one node (mp.spawn's `gpu`, `local_rank`).
_RANK_WORDS = frozenset({"rank", "gpu"})


def _no_binding(expr: ast.expr) -> ast.expr | None:
    return None


def is_rank_zero(test: ast.expr, resolve: Resolve = _no_binding) -> bool:
    """``rank == 0``, ``dist.get_rank() == 0``, ``local_rank in (-1, 0)``,
    ``rank % gpus_per_node == 0``, ``is_main_process()``, ``trainer.is_global_zero``..."""
    if isinstance(test, ast.BoolOp):
        return any(is_rank_zero(value, resolve) for value in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return is_rank_nonzero(test.operand, resolve)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, ast.Eq):
            return (_is_zero(right) and names_rank(left, resolve)) or (
                _is_zero(left) and names_rank(right, resolve)
            )
        if isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            return names_rank(left, resolve) and any(_is_zero(e) for e in right.elts)
        if isinstance(op, (ast.LtE, ast.Lt)):
            return (
                names_rank(left, resolve)
                and isinstance(right, ast.Constant)
                and right.value in ((0,) if isinstance(op, ast.LtE) else (1,))
            )
        return False
    return _names_main_process(test)


def is_rank_nonzero(test: ast.expr, resolve: Resolve = _no_binding) -> bool:
    """``rank != 0``, ``rank > 0``, ``if rank:``, ``not is_main_process()``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return is_rank_zero(test.operand, resolve)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(is_rank_nonzero(value, resolve) for value in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, ast.NotEq):
            return (_is_zero(right) and names_rank(left, resolve)) or (
                _is_zero(left) and names_rank(right, resolve)
            )
        if isinstance(op, (ast.Gt, ast.GtE)):
            return (
                names_rank(left, resolve)
                and isinstance(right, ast.Constant)
                and right.value in ((0,) if isinstance(op, ast.Gt) else (1,))
            )
        return False
    return (
        isinstance(test, (ast.Name, ast.Attribute, ast.Call))
        and names_rank(test, resolve)
        and not _names_main_process(test)
    )


def names_rank(expr: ast.expr, resolve: Resolve = _no_binding) -> bool:
    """``rank``, ``args.local_rank``, ``dist.get_rank()``, ``int(os.environ["RANK"])``,
    ``rank % gpus_per_node``, or a variable bound to one of those."""
    while isinstance(expr, ast.BinOp):  # rank % ngpus_per_node
        expr = expr.left
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.args
        and expr.func.id == "int"
    ):
        expr = expr.args[0]
    if _RANK_WORDS & set(_words(expr)):
        return True
    value = resolve(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    return value is not None and any(
        _RANK_WORDS & set(_words(node))
        or (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "rank" in torchapi.name_tokens(node.value)
        )
        for node in ast.walk(value)
        if isinstance(node, ast.expr)
    )


def _is_zero(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == 0 and expr.value is not False


def _words(expr: ast.expr) -> list[str]:
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Subscript):  # os.environ["RANK"]
        key = expr.slice
        return (
            torchapi.name_tokens(key.value)
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
            else []
        )
    if isinstance(expr, ast.Name):
        return torchapi.name_tokens(expr.id)
    if isinstance(expr, ast.Attribute):
        return torchapi.name_tokens(expr.attr)
    return []


def _names_main_process(expr: ast.expr) -> bool:
    words = set(_words(expr))
    return (
        bool(words & _MAIN_WORDS)
        or ("main" in words and len(words) > 1)
        or ("zero" in words and bool(words & {"rank", "global"}))
        # `is_root`, `is_root_worker()` (DALL-E's backends); not `data_root`, a path
        or ("root" in words and bool(words & {"is", "worker", "rank", "process"}))
    )


def resolver(ctx: FileContext, scope: Scope) -> Resolve:
    """A :data:`Resolve` that looks up what a name or ``self.attr`` was bound to in
    ``scope`` (an assignment only), for the rank tests."""

    def resolve(expr: ast.expr) -> ast.expr | None:
        if isinstance(expr, ast.Name):
            binding = ctx.binding(expr, scope)
        elif isinstance(expr, ast.Attribute):
            found = ctx.attribute_binding(expr, scope)
            binding = found[0] if found is not None else None
        else:
            return None
        return binding.value if binding is not None and binding.kind is BindingKind.ASSIGN else None

    return resolve


def true_on_rank_zero_only(ctx: FileContext, attribute: str) -> bool:
    """Whether every ``<obj>.<attribute> = <value>`` that may set the flag true, in the
    files of the program (its folder line and the modules it imports), sits in the body of
    a rank-zero test (HybrIK's ``init_dist``: ``if opt.rank % opt.ngpus_per_node == 0:
    opt.log = True else: opt.log = False``) or assigns a rank-zero test, and one does: a
    flag the program sets in another module, true only on rank 0."""
    key = ("rank-zero-flag", attribute)
    if key not in ctx.memo:
        verdicts: list[bool] = []
        needle = f".{attribute}".encode()
        for _, data in program_sources(ctx):
            if needle in data:
                verdicts += _flag_assignments(data, attribute)
        ctx.memo[key] = bool(verdicts) and all(verdicts)
    return bool(ctx.memo[key])


def _flag_assignments(data: bytes, attribute: str) -> list[bool]:
    """For each assignment of ``<obj>.<attribute>`` in a module's text that may set it
    true, whether it holds only on rank 0."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and is_rank_zero(node.test):
            guarded.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    found: list[bool] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not any(
            isinstance(t, ast.Attribute) and t.attr == attribute for t in node.targets
        ):
            continue
        value = node.value
        if isinstance(value, ast.Constant) and not value.value:
            continue  # `opt.log = False`: never sets it true
        found.append(id(node) in guarded or is_rank_zero(value))
    return found


def returns_rank_zero(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """Whether ``call`` runs a module-level function of another module of the project
    whose every return is a rank-zero test (ANCE's ``is_first_worker()``, in
    ``utils/util.py``: ``return not dist.is_initialized() or dist.get_rank() == 0``)."""
    qualified = ctx.qualified_name(call.func, scope)
    info = ctx.project.function(qualified, near=ctx.path) if qualified else None
    if info is None or os.path.abspath(info.path) == os.path.abspath(ctx.path):
        return False  # the file's own functions are followed with their bindings
    key = f"rank-zero-returns:{info.path}:{info.line}"
    return ctx.project.remember(key, partial(_returns_rank_zero, info.path, info.name, info.line))


def runs_on_rank_zero_only(ctx: FileContext, decorator: ast.expr, scope: Scope) -> bool:
    """Whether ``decorator`` is a function of the project (of this file or another
    module) whose wrapper calls the decorated function only under a rank-zero test
    (physicsnemo's ``@rank0``: ``if DistributedManager().rank == 0: return func(...)``)."""
    if not isinstance(decorator, (ast.Name, ast.Attribute)):
        return False
    local = ctx.resolve_local_call(ast.Call(func=decorator, args=[], keywords=[]), scope)
    if local is not None:
        return _wraps_for_rank_zero(local.node)
    qualified = ctx.qualified_name(decorator, scope)
    info = ctx.project.function(qualified, near=ctx.path) if qualified else None
    if info is None:
        return False
    key = f"rank-zero-decorator:{info.path}:{info.line}"
    return ctx.project.remember(
        key,
        lambda: (
            (found := _module_function(info.path, info.name, info.line)) is not None
            and _wraps_for_rank_zero(found)
        ),
    )


def _wraps_for_rank_zero(decorator: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``def deco(func): def wrapper(*a, **k): if <rank zero>: return func(*a, **k);
    return wrapper``: every call of ``func`` in the returned wrapper sits under the test."""
    arguments = decorator.args.posonlyargs + decorator.args.args
    if not arguments:
        return False
    wrapped = arguments[0].arg
    wrappers = {
        node.name: node
        for node in decorator.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    returned = [
        node.value.id
        for node in decorator.body
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name)
    ]
    if len(returned) != 1 or returned[0] not in wrappers:
        return False
    guarded: set[int] = set()
    for node in ast.walk(wrappers[returned[0]]):
        if isinstance(node, ast.If) and is_rank_zero(node.test):
            guarded.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    calls = [
        node
        for node in ast.walk(wrappers[returned[0]])
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == wrapped
    ]
    return bool(calls) and all(id(call) in guarded for call in calls)


def _module_function(path: str, name: str, line: int) -> ast.FunctionDef | None:
    """The top-level ``def name`` at ``line`` of the file at ``path``, read and parsed."""
    data = read_source(path)
    if not isinstance(data, bytes):
        return None
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    return next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == name and node.lineno == line
        ),
        None,
    )


def _returns_rank_zero(path: str, name: str, line: int) -> bool:
    function = _module_function(path, name, line)
    if function is None:
        return False
    returned = [
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Return) and node.value is not None
    ]
    return bool(returned) and all(is_rank_zero(value) for value in returned)
