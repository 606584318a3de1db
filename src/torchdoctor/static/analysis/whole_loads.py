"""Where a project reads pickled modules back whole: ``torch.load`` results used as modules.

A project that saves ``torch.save(model)`` and loads the file back as a module object
(``net = torch.load(path); net.eval()``, ``torch.load(path)["model"].state_dict()``: a
method only a module has; a name saying ``model`` often holds a state dict) has made
whole-module files its own format: the save is not a slip, and the place to act is the
load (torch 2.6 defaults to ``weights_only=True``, which refuses them). The other files of
the project are read only when a whole-module save asks, once per folder.
"""

from __future__ import annotations

import ast
import os
from typing import cast

from torchdoctor.static.analysis.callers import never_run
from torchdoctor.static.analysis.related_files import first_in_related_files
from torchdoctor.static.context import FileContext
from torchdoctor.static.names import own_nodes
from torchdoctor.static.project_facts import FORCE_FULL_UNPICKLING

# Methods only a module has (a tensor has .to(), .cuda(), .float() too); a loaded dict
# has no `load_state_dict` either (Diff-Pruning's `model = torch.load(pruned)` then
# `model.load_state_dict(finetuned)`).
_MODULE_ONLY = frozenset(
    {
        "eval",
        "train",
        "state_dict",
        "load_state_dict",
        "parameters",
        "named_parameters",
        "modules",
        "named_modules",
        "children",
        "fuse",
        "zero_grad",
    }
)


def project_whole_module_load(ctx: FileContext) -> tuple[str, int] | None:
    """``(path, line)`` of a ``torch.load`` whose result is used as a module, in this file
    or in another file of the project along the same folder line (its folder, a folder
    above or below it: a repository of separate examples is not one program)."""
    own = file_whole_module_loads(ctx)
    if own:
        return ctx.path, own[0].lineno
    return first_in_related_files(ctx, "whole-module-load", _whole_load_in)


def _whole_load_in(path: str, data: bytes) -> tuple[str, int] | None:
    if b"torch.load" not in data:
        return None
    try:
        tree = ast.parse(data, path)
    except (SyntaxError, ValueError):
        return None
    found = whole_module_loads(tree)
    return (os.path.relpath(path), found[0].lineno) if found else None


def file_whole_module_loads(ctx: FileContext) -> list[ast.Call]:
    """:func:`whole_module_loads` of the file being linted, read from its recorded calls
    and assignments (no walk of the tree), once per file."""
    key = ("whole-loads", "file")
    cached = ctx.memo.get(key)
    if cached is None:
        found: dict[int, ast.Call] = {}
        if "torch.load" in ctx.source:
            for scope, items in ctx.module.bodies():
                nodes = [item.node for item in items]
                # the ifs around them, for the type tests (items are no if statements)
                ifs = {
                    id(f.node): f.node
                    for i in items
                    for f in i.frames
                    if isinstance(f.node, ast.If)
                }
                nodes += ifs.values()
                if any(isinstance(n, ast.Call) and _is_torch_load(n) for n in nodes):
                    typed = scope is not None and _returns_a_module(scope.node)
                    found.update((id(call), call) for call in _module_uses(nodes, typed))
        cached = ctx.memo[key] = sorted(found.values(), key=_position)
    return cast("list[ast.Call]", cached)


def whole_module_loads(tree: ast.AST) -> list[ast.Call]:
    """The ``torch.load`` calls whose result is used as a module, in line order; a name is
    followed within its own function (or the module's top level)."""
    found: dict[int, ast.Call] = {}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, _SCOPES))]:
        for call in _in_scope(scope, _returns_a_module(scope)):
            found[id(call)] = call
    return sorted(found.values(), key=_position)


def _position(call: ast.Call) -> tuple[int, int]:
    return call.lineno, call.col_offset


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _returns_a_module(function: ast.AST) -> bool:
    """A function annotated to return a module (``-> nn.Module``): what it returns is
    used as one by its callers."""
    returns = getattr(function, "returns", None)
    if isinstance(returns, ast.Constant) and isinstance(returns.value, str):
        return returns.value.rpartition(".")[2] == "Module"
    name = returns.attr if isinstance(returns, ast.Attribute) else getattr(returns, "id", None)
    return name == "Module"


def _in_scope(scope: ast.AST, returns_a_module: bool = False) -> list[ast.Call]:
    return _module_uses(own_nodes(scope), returns_a_module)


def _module_uses(nodes: list[ast.AST], returns_a_module: bool = False) -> list[ast.Call]:
    """The loads, among the nodes of one scope, whose result is used as a module (or
    returned by a function annotated to return one)."""
    bound: list[tuple[str, ast.expr]] = []
    receivers: list[ast.expr] = []
    for node in nodes:
        if returns_a_module and isinstance(node, ast.Return) and node.value is not None:
            receivers.append(node.value)
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            bound.append((node.targets[0].id, node.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MODULE_ONLY
        ):
            receivers.append(node.func.value)
    if receivers:
        skipped = _type_tested_names(nodes) | never_run(nodes)
        receivers = [r for r in receivers if id(r) not in skipped]
        bound = [(name, value) for name, value in bound if id(value) not in skipped]
    if not receivers:
        return []
    loaded: dict[str, ast.Call] = {}
    for _ in range(3):  # ckpt = torch.load(p); net = ckpt["model"]; net.eval()
        for name, value in bound:
            call = _loaded_call(value, loaded)
            if call is not None and name not in loaded:
                loaded[name] = call
    return [
        call
        for r in receivers
        if (call := _loaded_call(r, loaded)) is not None and not _consumed_before(r, bound, loaded)
    ]


def _type_tested_names(nodes: list[ast.AST]) -> set[int]:
    """The names read in a branch of an ``if`` that tests their type (Point-MAE's ``if not
    isinstance(best_metrics, dict): best_metrics = best_metrics.state_dict()``), by node
    id: the code expects either kind there, and a method call on the name is the fallback
    for one of them, not proof of what the file holds."""
    found: set[int] = set()
    for node in nodes:
        if not isinstance(node, ast.If):
            continue
        names = {
            test.args[0].id
            for test in ast.walk(node.test)
            if isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance"
            and test.args
            and isinstance(test.args[0], ast.Name)
        }
        if names:
            found.update(
                id(inner)
                for statement in (*node.body, *node.orelse)
                for inner in ast.walk(statement)
                if isinstance(inner, ast.Name) and inner.id in names
            )
    return found


def _consumed_before(
    receiver: ast.expr, bound: list[tuple[str, ast.expr]], loaded: dict[str, ast.Call]
) -> bool:
    """Whether the loaded name was rebuilt from its own value into something that is not
    the load before the receiver reads it (``model = torch.load(p)`` read as a dict, then
    ``model = Reader.from_pretrained(model["arguments"]["model"])`` and ``model.eval()``).
    A binding that does not read the name may be the other branch of an ``if``, and does
    not count."""
    root = receiver
    while isinstance(root, (ast.Subscript, ast.Call, ast.Attribute)):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name) or root.id not in loaded:
        return False
    load = loaded[root.id]
    position = (receiver.lineno, receiver.col_offset)
    for name, value in bound:
        if (
            name == root.id
            and (load.lineno, load.col_offset) < (value.lineno, value.col_offset) < position
            and _loaded_call(value, loaded) is None
            and _passed_into_a_call(value, name)
        ):
            return True
    return False


def _passed_into_a_call(value: ast.expr, name: str) -> bool:
    """``Reader.from_pretrained(model["arguments"]["model"])``: an entry of the loaded
    object is handed to another call, to build something new from it (not
    ``DataParallel(model)`` or ``fuse(model)``, which wrap the object itself, nor
    ``model.module`` or ``ckpt.get("ema") or ckpt["model"]``, which are the object)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                for inner in ast.walk(argument):
                    entry = inner
                    while isinstance(entry, ast.Subscript):
                        entry = entry.value
                    if entry is not inner and isinstance(entry, ast.Name) and entry.id == name:
                        return True
    return False


def _loaded_call(expr: ast.expr, loaded: dict[str, ast.Call]) -> ast.Call | None:
    """The load ``expr`` comes from: a ``torch.load`` call or a loaded name, through
    subscripts and method chains (``torch.load(p)["ema"].float()``)."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and _is_torch_load(expr):
            return expr
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        elif isinstance(expr, ast.Name):
            return loaded.get(expr.id)
        else:
            return None


def _is_torch_load(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "load"
        and isinstance(func.value, ast.Name)
        and func.value.id == "torch"
    )


def full_unpickling_forced(ctx: FileContext) -> str | None:
    """Where ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set before this file's loads run:
    ``"this file"``, or the ``__init__.py`` of a package holding the file (importing any
    module of a package runs its ``__init__`` first). ``None`` when neither sets it."""
    if FORCE_FULL_UNPICKLING in ctx.source:
        return "this file"
    project = ctx.project
    directory = os.path.dirname(os.path.abspath(ctx.path))
    for _ in range(16):
        facts = project.facts_for(os.path.join(directory, "__init__.py"))
        if facts is None:
            return None  # not a package (or not linted with this one)
        if facts.forces_full_unpickling:
            return f"package `{facts.name}` (its `__init__.py`)"
        directory = os.path.dirname(directory)
    return None
