"""Whether the program fills every parameter of a model in one loop.

Research code often builds the whole model and then initialises it from the training
script: ``for name, p in model.named_parameters(): if "bias" not in name and p.dim() >
1: nn.init.xavier_uniform_(p)`` (the Annotated Transformer's idiom, FLAT's lattice NER).
A class that makes ``self.u = nn.Parameter(torch.Tensor(h, d))`` and never writes it is
filled there before any forward. The loop is looked for in the file and in the project's
modules that import it, directly or through a few others (the script imports the model,
which imports its layers); its filter on the parameter's name and number of dimensions is
read, so a parameter the filter leaves out is not counted.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from functools import partial
from typing import cast

from torchdoctor.static.analysis.related_files import importing_paths
from torchdoctor.static.branches import compared
from torchdoctor.static.context import FileContext
from torchdoctor.static.files import read_source

__all__ = ["filled_by_a_model_loop"]

# Initialisers given the parameter (`nn.init.xavier_uniform_(p)`), and in-place fills
# called on it (`p.data.normal_(0, 0.02)`).
_INITIALISERS = frozenset(
    {"uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_"}
    | {"xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"}
    | {"orthogonal_", "sparse_", "dirac_"}
)
# (`copy_` is left out: an EMA loop copies another model's values, defined or not.)
_FILLS = frozenset({"normal_", "uniform_", "zero_", "fill_", "trunc_normal_"})
_PARAMETER_LOOPS = frozenset({"parameters", "named_parameters"})


def filled_by_a_model_loop(ctx: FileContext, attribute: str, dims: int | None) -> bool:
    """Whether a loop over a model's ``parameters()``/``named_parameters()`` in the
    program writes each parameter it lets through, and its filter lets through a
    parameter named ``<...>.<attribute>`` with ``dims`` dimensions (``None``: unknown)."""

    def lets_through(loops: list[ast.For]) -> bool:
        return any(_lets_through(loop, attribute, dims) for loop in loops)

    key = ("model-init-loops", ctx.path)
    if key not in ctx.memo:  # the file's loops, read once for all its parameters
        ctx.memo[key] = _loops_in(ctx.source.encode("utf-8", "replace"))
    if lets_through(cast("list[ast.For]", ctx.memo[key])):
        return True
    project = ctx.project
    for path in _importers(ctx):
        if lets_through(project.remember(f"model-init-loops:{path}", partial(_read, path))):
            return True
    return False


def _read(path: str) -> list[ast.For]:
    data = read_source(path)
    return _loops_in(data) if isinstance(data, bytes) else []


def _loops_in(data: bytes) -> list[ast.For]:
    return list(_init_loops(data)) if b"parameters()" in data else []


# How many import steps separate a training script from the module of a class its model
# holds (`flat_main.py` imports `models.py`, which imports `modules.py`).
_IMPORT_DEPTH = 3


def _importers(ctx: FileContext) -> list[str]:
    """The project's modules that import the file, directly or through up to
    ``_IMPORT_DEPTH`` modules: the programs that can build its classes. A script beside
    it that imports none of them is another program (an examples folder)."""
    own = os.path.abspath(ctx.path)
    project = ctx.project

    def reach() -> list[str]:
        seen, frontier, found = {own}, [own], []
        for _ in range(_IMPORT_DEPTH):
            following = []
            for path in frontier:
                for importer in importing_paths(project, path):
                    if importer not in seen:
                        seen.add(importer)
                        following.append(importer)
                        found.append(importer)
            frontier = following
        return found

    return list(project.remember(f"importers-within-{_IMPORT_DEPTH}:{own}", reach))


def _init_loops(data: bytes) -> Iterator[ast.For]:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Attribute)
            and node.iter.func.attr in _PARAMETER_LOOPS
            and not (
                isinstance(node.iter.func.value, ast.Name) and node.iter.func.value.id == "self"
            )
        ):
            yield node  # a class's loop over its own parameters is read with the class


def _lets_through(loop: ast.For, attribute: str, dims: int | None) -> bool:
    """Some write of the loop's parameter sits on a path whose tests may hold for it."""
    name, parameter = _loop_names(loop)
    if parameter is None:
        return False
    return any(
        all(_may_hold(test, name, parameter, attribute, dims) is not False for test in tests)
        for tests in _writes(loop.body, parameter, [])
    )


def _loop_names(loop: ast.For) -> tuple[str | None, str | None]:
    """The names bound to the parameter's name and to the parameter."""
    target = loop.target
    if isinstance(target, ast.Name):
        return None, target.id
    if (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and all(isinstance(e, ast.Name) for e in target.elts)
    ):
        return target.elts[0].id, target.elts[1].id  # type: ignore[attr-defined]
    return None, None


def _writes(
    body: list[ast.stmt], parameter: str, tests: list[ast.expr]
) -> Iterator[list[ast.expr]]:
    """For each statement that initialises ``parameter``, the ``if`` tests (negated for
    an ``else``) that must hold to reach it."""
    for statement in body:
        if isinstance(statement, ast.If):
            yield from _writes(statement.body, parameter, [*tests, statement.test])
            negated = ast.UnaryOp(op=ast.Not(), operand=statement.test)
            yield from _writes(statement.orelse, parameter, [*tests, negated])
        elif isinstance(statement, (ast.With, ast.Try)):
            yield from _writes(statement.body, parameter, tests)
        elif any(_initialises(call, parameter) for call in ast.walk(statement)):
            yield tests


def _initialises(node: ast.AST, parameter: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    attr = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if attr in _INITIALISERS and node.args and _is(node.args[0], parameter):
        return True
    if isinstance(func, ast.Attribute) and attr in _FILLS:
        owner = func.value
        if isinstance(owner, ast.Attribute) and owner.attr == "data":
            owner = owner.value
        return _is(owner, parameter)
    return False


def _is(node: ast.expr, name: str) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    return isinstance(node, ast.Name) and node.id == name


def _may_hold(
    test: ast.expr, name: str | None, parameter: str, attribute: str, dims: int | None
) -> bool | None:
    """``False`` when ``test`` is false for the parameter, ``True`` when true, ``None``
    when it cannot be told. ``"bias" not in name`` is false for ``<...>.bias_u``; a test
    on the name lint cannot place (``name.startswith("encoder")``) cannot be told."""
    if isinstance(test, ast.BoolOp):
        values = [_may_hold(v, name, parameter, attribute, dims) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _may_hold(test.operand, name, parameter, attribute, dims)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if (
            name is not None
            and isinstance(op, (ast.In, ast.NotIn))
            and isinstance(left, ast.Constant)
            and isinstance(left.value, str)
            and isinstance(right, ast.Name)
            and right.id == name
        ):
            # the words of the module path above the attribute are not known; those of
            # the attribute are: `"bias" in name` is true for `...bias_k`, and is taken as
            # false otherwise (a module path rarely spells a parameter's kind)
            inside = left.value in attribute
            return inside if isinstance(op, ast.In) else not inside
        count = _dimensions_read(left, parameter)
        if count and dims is not None and isinstance(right, ast.Constant):
            bound = right.value
            if isinstance(bound, int):
                return compared(dims, op, bound)
    return None


def _dimensions_read(node: ast.expr, parameter: str) -> bool:
    """``p.dim()``, ``p.ndim``, ``p.ndimension()``, ``len(p.shape)``, ``len(p.size())``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("dim", "ndimension") and _is(node.func.value, parameter)
    if isinstance(node, ast.Attribute) and node.attr == "ndim":
        return _is(node.value, parameter)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and node.args
    ):
        inner = node.args[0]
        if isinstance(inner, ast.Call):
            inner = inner.func
        return (
            isinstance(inner, ast.Attribute)
            and inner.attr in ("shape", "size")
            and _is(inner.value, parameter)
        )
    return False
