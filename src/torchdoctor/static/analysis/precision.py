"""Evidence in a file that its float64 is chosen for precision, not by accident.

TD102 says float64 costs memory and speed "for no gain in accuracy". A file proves the
opposite when it asks for more than float32 can give:

* a **tolerance** below float32's resolution: a number under 2**-23 (about 1.2e-7) given to
  a tolerance (``atol=1e-8``, ``rtol=1e-10``, ``tol = 1e-9``, ``def solve(x, tol=1e-12)``,
  ``{"atol": 1e-8}``). An ODE solver or an iterative method stops when its error estimate
  falls under the tolerance, which float32 rounding cannot reach. An ``eps`` is not one:
  ``Adam(eps=1e-8)`` and ``x / (norm + 1e-8)`` guard a division and work in float32.
* a **numerically sensitive solver**: a factorisation, inverse, determinant or eigen
  problem of ``torch.linalg`` (or its older ``torch.`` spellings), where float32's seven
  digits break down on ill-conditioned matrices;
* a **numerical gradient check** (``gradcheck``), whose finite differences need float64;
* a **Gaussian-process model** (GPyTorch, BoTorch, Pyro's ``contrib.gp`` and
  ``contrib.timeseries``), whose likelihood factors a kernel matrix at every step, or a
  **nonlinear least-squares layer** (Theseus), whose optimizer steps solve the normal
  equations by Cholesky or LU.

The evidence is looked for in the whole file: a program that states such a need anywhere
made its float64 on purpose. One more kind of evidence is local to a use: float64 made
under a **precision option** (``if double_precision:``, ``if args.dtype == "float64":``,
``torch.float64 if opt.fp64 else torch.float32``) is what the user asked for; float64
whose **comment or docstring says it is for precision** ("to alleviate floating point
error", "use double precision for the automatic tests") is chosen on purpose too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext
from torchdoctor.static.structure import FrameKind, Item, ModuleScope

__all__ = [
    "FLOAT32_RESOLUTION",
    "PrecisionNeed",
    "precision_need",
    "precision_option",
    "stated_precision",
]

FLOAT32_RESOLUTION = 2.0**-23
"""float32's relative spacing at 1.0 (its machine epsilon, about 1.19e-7)."""

# Names of tolerances (keywords, variables, parameters, dict keys), compared lower-case.
_TOLERANCES = frozenset(
    {"atol", "rtol", "tol", "tolerance", "abstol", "reltol", "xtol", "ftol", "gtol"}
)
_TOLERANCE_ENDS = ("_tol", "_atol", "_rtol", "_tolerance")
_TOLERANCE_STARTS = ("tol_", "tolerance_", "atol_", "rtol_")


@dataclass(frozen=True, slots=True)
class PrecisionNeed:
    """Why a file needs float64: the node that says so and the words for a message."""

    node: ast.AST
    kind: str  # "tolerance", "solver", "gradcheck" or "stated"
    reason: str


def precision_need(ctx: FileContext, module: ModuleScope) -> PrecisionNeed | None:
    """The first evidence in the file that float64 is needed for precision, if any."""
    memo_key = ("precision_need", id(module))
    if memo_key in ctx.memo:
        return cast("PrecisionNeed | None", ctx.memo[memo_key])
    found = _tolerance(ctx) or _solver(ctx, module)
    ctx.memo[memo_key] = found
    return found


# What a comment or docstring says of float64 chosen for its precision.
_PRECISION_WORDS = (
    "precision",
    "floating point",
    "floating-point",
    "round-off",
    "roundoff",
    "rounding error",
    "numerical error",
    "numerically",
)


def stated_precision(ctx: FileContext, line: int, function: ast.AST | None) -> PrecisionNeed | None:
    """A comment on ``line`` or on the comment lines of the three lines above it (not past
    a blank line), or the docstring of the function around it, that says the float64
    there is for precision (auto_LiRPA's ``_to_float64``: "Transfer variables to float64
    only in the last iteration to help alleviate floating point error"; "Use double
    precision ... for automatic testing")."""
    lines = ctx.source.splitlines()
    said: list[str] = []
    if 0 < line <= len(lines) and "#" in lines[line - 1]:
        said.append(lines[line - 1].split("#", 1)[1])
    for above in range(line - 2, max(line - 5, -1), -1):  # up to three lines, one block
        text = lines[above].strip() if above < len(lines) else ""
        if not text:
            break
        if text.startswith("#"):
            said.append(text)
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        said.append(ast.get_docstring(function) or "")
    for text in said:
        words = " ".join(text.lower().split())
        if any(word in words for word in _PRECISION_WORDS):
            return PrecisionNeed(
                node=ast.Constant(value=text.strip()),
                kind="stated",
                reason="the comment or docstring beside it says it is there for precision",
            )
    return None


def precision_option(item: Item, hit: ast.AST) -> ast.expr | None:
    """The test of an ``if`` (or of a conditional expression around ``hit``) that chooses
    float64 by name, if the float64 at ``hit`` is made under one."""
    for frame in reversed(item.frames):
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            choice = cast("ast.If", frame.node)
            if _names_float64(choice.test):
                return choice.test
            other = choice.orelse if frame.kind is FrameKind.IF_BODY else choice.body
            if _casts_to_another_float(other, hit):
                return choice.test
    for node in ast.walk(item.node):
        if (
            isinstance(node, ast.IfExp)
            and _names_float64(node.test)
            and any(inner is hit for inner in ast.walk(node))
        ):
            return node.test
    return None


# Methods that cast a module or tensor to a float dtype other than float64.
_OTHER_FLOATS = frozenset({"float", "half", "bfloat16"})


def _casts_to_another_float(block: list[ast.stmt], hit: ast.AST) -> bool:
    """``block`` (the other arm of the ``if`` around ``hit``) casts what ``hit`` casts to
    float64 to another float type instead (``if args.use_float: model.float() else:
    model.double()``, TALENT's methods): the ``if`` is a precision switch."""
    if not (isinstance(hit, ast.Call) and isinstance(hit.func, ast.Attribute)):
        return False
    receiver = ast.unparse(hit.func.value)
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _OTHER_FLOATS
        and ast.unparse(node.func.value) == receiver
        for statement in block
        for node in ast.walk(statement)
    )


# Words that name float64 in an option's name or value, compared lower-case.
_FLOAT64_WORDS = ("double", "float64", "fp64", "f64")


def _names_float64(test: ast.expr) -> bool:
    """``test`` reads an option named for float64 (``args.double``, ``use_fp64``) or
    compares a setting with a float64 value (``dtype == "float64"``, ``precision == 64``)."""
    for node in ast.walk(test):
        word = None
        if isinstance(node, ast.Name):
            word = node.id
        elif isinstance(node, ast.Attribute) and not _dtype_constant(node):
            word = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            word = node.value
        if word is not None and any(w in word.lower() for w in _FLOAT64_WORDS):
            return True
        if isinstance(node, ast.Compare) and any(
            isinstance(c, ast.Constant) and c.value in (64, "64")
            for c in (node.left, *node.comparators)
        ):
            return True
    return False


def _dtype_constant(node: ast.Attribute) -> bool:
    """``torch.float64``, ``np.double``: a tensor's dtype tested, not an option."""
    return isinstance(node.value, ast.Name) and node.value.id in ("torch", "np", "numpy")


def is_tolerance_name(name: str) -> bool:
    """Whether a keyword, variable or key name names a tolerance."""
    lowered = name.lower().lstrip("_")
    return (
        lowered in _TOLERANCES
        or lowered.endswith(_TOLERANCE_ENDS)
        or lowered.startswith(_TOLERANCE_STARTS)
    )


def _tolerance(ctx: FileContext) -> PrecisionNeed | None:
    """The file's first tolerance (by position) set below float32's resolution."""
    found = [
        (value.lineno, value.col_offset, name, value)
        for name, value in _named_values(ctx.tree)
        if is_tolerance_name(name) and _below_float32(value)
    ]
    if not found:
        return None
    line, _, name, value = min(found, key=lambda entry: entry[:2])
    return PrecisionNeed(
        value,
        "tolerance",
        f"the tolerance `{name}={ctx.segment(value)}` at line {line} is below float32's "
        "resolution (about 1.2e-7), which float32 cannot meet",
    )


def _named_values(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """(name, value) for every keyword argument, assignment, default and string dict key."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg is not None:
            yield node.arg, node.value
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = _target_name(target)
                if name is not None:
                    yield name, node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _defaults(node.args)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, value


def _defaults(args: ast.arguments) -> Iterator[tuple[str, ast.expr]]:
    positional = args.posonlyargs + args.args
    defaulted = positional[len(positional) - len(args.defaults) :]
    for arg, default in zip(defaulted, args.defaults, strict=True):
        yield arg.arg, default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if kw_default is not None:
            yield arg.arg, kw_default


def _target_name(target: ast.expr) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _below_float32(value: ast.expr) -> bool:
    """A positive number literal under float32's resolution (``1e-8``, not ``0``)."""
    return (
        isinstance(value, ast.Constant)
        and isinstance(value.value, (int, float))
        and not isinstance(value.value, bool)
        and 0 < value.value < FLOAT32_RESOLUTION
    )


def _solver(ctx: FileContext, module: ModuleScope) -> PrecisionNeed | None:
    for scope, items in module.bodies():
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call):
                continue
            qualified = ctx.qualified_name(node.func, scope)
            if qualified in torchapi.GRADCHECK:
                return PrecisionNeed(
                    node,
                    "gradcheck",
                    f"the file checks gradients numerically (`{qualified}` at line "
                    f"{node.lineno}), and finite differences need float64",
                )
            if qualified in torchapi.SENSITIVE_SOLVERS:
                return PrecisionNeed(
                    node,
                    "solver",
                    f"it runs `{qualified}` (line {node.lineno}), a solver whose results "
                    "float32's seven digits spoil on ill-conditioned matrices",
                )
            if qualified and qualified.startswith(_LEAST_SQUARES):
                return PrecisionNeed(
                    node,
                    "solver",
                    f"it uses `{qualified}` (line {node.lineno}) of a differentiable "
                    "nonlinear least-squares library, whose Gauss-Newton and "
                    "Levenberg-Marquardt steps solve linear systems (Cholesky, LU) that "
                    "float32 spoils when ill-conditioned",
                )
            if qualified and qualified.startswith(_GAUSSIAN_PROCESSES):
                return PrecisionNeed(
                    node,
                    "solver",
                    f"it builds `{qualified}` (line {node.lineno}), a Gaussian-process "
                    "model whose Cholesky solves of kernel matrices need float64",
                )
    return None


# Gaussian-process libraries: their models factor kernel matrices (Cholesky) on every
# evaluation of the likelihood, and document float64 as the dtype to train them in.
_GAUSSIAN_PROCESSES = ("gpytorch.", "pyro.contrib.gp.", "pyro.contrib.timeseries.", "botorch.")
# Differentiable nonlinear least squares (Theseus): every optimizer step factors the
# normal equations of the objective, the same sensitive solve as torch.linalg's.
_LEAST_SQUARES = ("theseus.",)
