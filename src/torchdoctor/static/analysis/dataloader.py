"""What a ``DataLoader(...)`` call of the file says, for the data rules (TD405-TD408).

:func:`loader_arguments` reads a call's arguments by parameter name, positional or keyword;
:func:`worker_count` reads ``num_workers`` as a number when the file shows it;
:func:`loader_of` finds the loader a ``for`` loop iterates (through ``enumerate``,
``tqdm``, a variable or ``self.loader``); :func:`worker_loaders` finds a worker-backed
loader that a function of another project file builds; :func:`one_per_batch_wherever_passed`
follows a loader handed to a function back to where each caller builds it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import (
    UNDECIDED,
    constant_arguments,
    project_call_sites,
    truth_under,
)
from torchdoctor.static.analysis.calls import last_name, values_assigned
from torchdoctor.static.analysis.related_files import parsed_module
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import statement_blocks
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.project import ProjectIndex
from torchdoctor.static.structure import FunctionScope, Item

__all__ = [
    "assigned_name",
    "is_false",
    "iterated",
    "loader_arguments",
    "loader_calls",
    "loader_of",
    "loads",
    "one_per_batch",
    "one_per_batch_wherever_passed",
    "worker_count",
    "worker_loaders",
]

_POSITIONAL = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)
_DATALOADER = torchapi.DATALOADER
_WRAPPERS = frozenset(
    {
        "enumerate",
        "iter",
        "tqdm",
        "tqdm.tqdm",
        "tqdm.auto.tqdm",
        "tqdm.notebook.tqdm",
        "rich.progress.track",
    }
)


def loader_arguments(call: ast.Call) -> dict[str, ast.expr]:
    """A ``DataLoader(...)`` call's arguments by parameter name."""
    found: dict[str, ast.expr] = {}
    for name, value in zip(_POSITIONAL, call.args, strict=False):
        if isinstance(value, ast.Starred):
            break
        found[name] = value
    for keyword in call.keywords:
        if keyword.arg is not None:
            found[keyword.arg] = keyword.value
    return found


def worker_count(ctx: FileContext, value: ast.expr | None, scope: Scope) -> int | None:
    """``num_workers`` as a number: 0 when absent, ``None`` when only known at run time. A
    parameter of the function is what the file's calls of it pass, or its default
    (scGPT's ``prepare_dataloader(..., num_workers=0)``, never called with workers): the
    most any of them asks for, when every one is a number. A conditional expression is
    its branch when its test compares numbers the file fixes (braindecode's
    ``0 if n_jobs <= 1 else n_jobs`` under ``n_jobs = 1``), else the larger branch."""
    if value is None:
        return 0
    return _number(ctx, value, scope, 0)


def _number(ctx: FileContext, value: ast.expr, scope: Scope, depth: int) -> int | None:
    if depth > 4:
        return None
    if isinstance(value, ast.Name):
        found = ctx.lookup(value, scope)
        if found is not None and found[0].kind is BindingKind.ASSIGN and found[0].value:
            return _number(ctx, found[0].value, found[1], depth + 1)
        if found is not None and found[0].kind is BindingKind.PARAMETER and scope is not None:
            return _passed_workers(ctx, scope, value.id) if depth == 0 else None
        return None
    if isinstance(value, ast.Constant):
        number = value.value
        return int(number) if isinstance(number, int) else None
    if isinstance(value, ast.IfExp):
        branches = (value.body, value.orelse)
        holds = _comparison(ctx, value.test, scope, depth)
        if holds is not None:
            return _number(ctx, branches[0] if holds else branches[1], scope, depth + 1)
        counts = [_number(ctx, branch, scope, depth + 1) for branch in branches]
        return None if None in counts else max(c for c in counts if c is not None)
    return None


_COMPARE = {
    ast.Lt: int.__lt__,
    ast.LtE: int.__le__,
    ast.Gt: int.__gt__,
    ast.GtE: int.__ge__,
    ast.Eq: int.__eq__,
    ast.NotEq: int.__ne__,
}


def _comparison(ctx: FileContext, test: ast.expr, scope: Scope, depth: int) -> bool | None:
    """``a < b`` (one operator) between numbers the file fixes; ``None`` otherwise."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    compare = _COMPARE.get(type(test.ops[0]))
    left = _number(ctx, test.left, scope, depth + 1)
    right = _number(ctx, test.comparators[0], scope, depth + 1)
    if compare is None or left is None or right is None:
        return None
    return bool(compare(left, right))


def _passed_workers(ctx: FileContext, function: FunctionScope, name: str) -> int | None:
    """The most workers the file's calls of ``function`` pass for its parameter ``name``
    (its default where a call passes nothing), or ``None`` when one is not a number or no
    call is seen."""
    counts: list[int] = []
    for _, item in ctx.callers(function):
        if not isinstance(item.node, ast.Call):
            continue
        passed = constant_arguments(item.node, function).get(name)
        if not isinstance(passed, int):
            return None  # not a literal (or `**options`, `*args` may pass it)
        counts.append(passed)
    return max(counts) if counts else None


def is_false(value: ast.expr | None) -> bool:
    """An argument left out, or given as ``False``/``None``."""
    return value is None or isinstance(value, ast.Constant) and value.value in (False, None)


def loader_calls(ctx: FileContext, items: list[Item], scope: Scope) -> Iterator[ast.Call]:
    """The ``DataLoader(...)`` calls among recorded items."""
    for item in items:
        node = item.node
        if isinstance(node, ast.Call) and ctx.is_call_to(node, _DATALOADER, scope=scope):
            yield node


def iterated(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.expr:
    """``x`` of ``enumerate(x)``, ``tqdm(x)``, ``iter(x)``; else ``expr`` itself."""
    while isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        name = (
            func.id
            if isinstance(func, ast.Name) and func.id in ("enumerate", "iter")
            else ctx.qualified_name(func, scope)
        )
        if name not in _WRAPPERS:
            break
        expr = expr.args[0]
    return expr


def loader_of(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.Call | None:
    """The ``DataLoader(...)`` call a loop's iterable comes from, when the file shows it."""
    expr = iterated(ctx, expr, scope)
    if isinstance(expr, ast.Name):
        found = ctx.lookup(expr, scope)
        expr = found[0].value if found is not None and found[0].value is not None else expr
        scope = found[1] if found is not None else scope
    elif isinstance(expr, ast.Attribute):
        attribute = ctx.attribute_binding(expr, scope)
        if attribute is not None and attribute[0].value is not None:
            expr, scope = attribute[0].value, attribute[1]
    if isinstance(expr, ast.Call) and ctx.is_call_to(expr, _DATALOADER, scope=scope):
        return expr
    return None


def assigned_name(items: list[Item], call: ast.Call) -> ast.expr | None:
    """The target of ``name = DataLoader(...)`` for a loader call, if it is assigned."""
    for item in items:
        node = item.node
        if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1:
            return node.targets[0]
    return None


def loads(node: ast.AST, name: str) -> bool:
    """Whether ``name`` is read anywhere inside ``node``."""
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for n in ast.walk(node)
    )


def worker_loaders(project: ProjectIndex, path: str, function: str) -> int | None:
    """The line of a ``DataLoader(...)`` that may start worker processes (a
    ``num_workers`` that is not a literal 0), built by the module-level function
    ``function`` of the project file ``path`` or by a function of the same file it calls
    (two deep); ``None`` when none does. The file is parsed once per project."""

    tree = parsed_module(project, path)
    if tree is None:
        return None
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    pending, seen = [(function, 0)], set()
    while pending:
        name, depth = pending.pop()
        definition = functions.get(name)
        if definition is None or name in seen:
            continue
        seen.add(name)
        for node in ast.walk(definition):
            if not isinstance(node, ast.Call):
                continue
            called = last_name(node.func)
            if called == "DataLoader":
                workers = loader_arguments(node).get("num_workers")
                if workers is not None and not (
                    isinstance(workers, ast.Constant) and workers.value == 0
                ):
                    return node.lineno
            elif called in functions and depth < 2:
                pending.append((called, depth + 1))
    return None


def one_per_batch_wherever_passed(
    ctx: FileContext, function: FunctionScope, parameter: str
) -> bool:
    """Whether every call of ``function`` the project shows hands it, for ``parameter``, a
    loader built with ``batch_size`` 1: a ``DataLoader(...)`` itself, or the one a
    project function returns for the call's constant arguments (univnet's
    ``validate(..., valloader, ...)`` with ``valloader = create_dataloader(hp, args,
    False)``, whose ``else`` arm returns ``DataLoader(dataset, batch_size=1)``)."""
    sites = project_call_sites(ctx, function)
    if not sites:
        return False
    for path, tree, call in sites:
        passed = function.argument_for(call, parameter)
        if isinstance(passed, ast.Name):
            bound = values_assigned(tree, passed.id)  # one binding in the file, or unknown
            passed = bound[0] if len(bound) == 1 else None
        if not (isinstance(passed, ast.Call) and _builds_one_per_batch(ctx.project, path, passed)):
            return False
    return True


def _builds_one_per_batch(project: ProjectIndex, path: str, call: ast.Call) -> bool:
    """``call`` (in the file at ``path``) is ``DataLoader(...)`` with batch size 1, or a
    call of a project function every ``DataLoader(...)`` of which that the call's
    constant arguments leave reachable has batch size 1."""
    if last_name(call.func) == "DataLoader":
        return _one_per_batch(call)
    facts = project.facts_for(path)
    if facts is None or not isinstance(call.func, ast.Name):
        return False
    target = facts.imports.get(call.func.id, f"{facts.name}.{call.func.id}")
    helper = project.function(target, path)
    tree = parsed_module(project, helper.path) if helper is not None else None
    definition = next(
        (
            n
            for n in (tree.body if tree is not None else [])
            if isinstance(n, ast.FunctionDef) and helper is not None and n.name == helper.name
        ),
        None,
    )
    if definition is None:
        return False
    loaders = _reachable_loaders(definition.body, _constant_arguments(call, definition))
    return bool(loaders) and all(_one_per_batch(loader) for loader in loaders)


def _constant_arguments(call: ast.Call, definition: ast.FunctionDef) -> dict[str, object]:
    """The helper's parameters a call gives a literal constant, by position, keyword or
    default: :func:`~.callers.constant_arguments` for a function of another file, which
    has no scope of its own here."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return {}
    arguments = definition.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args]
    defaulted = names[len(names) - len(arguments.defaults) :]
    given: dict[str, ast.expr] = dict(zip(defaulted, arguments.defaults, strict=True))
    given.update(zip(names, call.args, strict=False))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    return {name: value.value for name, value in given.items() if isinstance(value, ast.Constant)}


def _reachable_loaders(body: list[ast.stmt], constants: dict[str, object]) -> list[ast.Call]:
    """The ``DataLoader(...)`` calls of a function body outside the arms of an ``if`` the
    constants rule out (nested functions and classes left out)."""
    found: list[ast.Call] = []
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If):
            truth = truth_under(statement.test, constants)
            if truth is UNDECIDED or truth:
                found += _reachable_loaders(statement.body, constants)
            if truth is UNDECIDED or not truth:
                found += _reachable_loaders(statement.orelse, constants)
            continue
        blocks = statement_blocks(statement)
        if not blocks:
            found += _loader_calls_in(statement)
            continue
        for part in ast.iter_child_nodes(statement):  # a loop's iterable, a with's items
            if not isinstance(part, (ast.stmt, ast.excepthandler, ast.match_case)):
                found += _loader_calls_in(part)
        for block in blocks:
            found += _reachable_loaders(block, constants)
    return found


def _loader_calls_in(node: ast.AST) -> list[ast.Call]:
    """The ``DataLoader(...)`` calls anywhere under ``node``."""
    return [
        n for n in ast.walk(node) if isinstance(n, ast.Call) and last_name(n.func) == "DataLoader"
    ]


def one_per_batch(loader: ast.Call) -> bool:
    """A ``DataLoader(...)`` call whose batch size is 1: given, or left to its default,
    with no ``batch_sampler``."""
    arguments = loader_arguments(loader)
    if "batch_sampler" in arguments:
        return False
    size = arguments.get("batch_size")
    return size is None or (isinstance(size, ast.Constant) and size.value == 1)


def _one_per_batch(loader: ast.Call) -> bool:
    """:func:`one_per_batch`, for a loader of another file whose ``**options`` may hold
    any batch size: none counts."""
    return not any(k.arg is None for k in loader.keywords) and one_per_batch(loader)
