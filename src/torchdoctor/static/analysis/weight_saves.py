"""Whether a program writes its model weights from the CPU, read across its files.

A load without ``map_location`` is harmless when the file holds CPU tensors. Projects
often save through one helper in another module: UNITER's ``ModelSaver.save`` writes
``{k: v.cpu() ... for k, v in model.state_dict().items()}``, and every training and
inference script loads those files back. The saves of the linted file's program (its
folder line and the modules it imports, see :mod:`related_files`) are read as text and
parsed: when every ``torch.save`` of a model's weights among them moves the tensors to
the CPU, a checkpoint the program reads back for its weights holds CPU tensors. A save of
an optimizer's state (a file of its own, or an entry whose key or value names one) is
not a save of weights; it keeps its device, and a load that restores an optimizer is not
covered.
"""

from __future__ import annotations

import ast
from functools import partial
from typing import cast

from torchdoctor.static.analysis.cpu_values import holds_cpu_data
from torchdoctor.static.analysis.related_files import program_sources
from torchdoctor.static.context import FileContext

__all__ = ["restores_an_optimizer", "weights_saved_from_the_cpu"]


def weights_saved_from_the_cpu(ctx: FileContext) -> bool:
    """Every ``torch.save`` of model weights in the program moves them to the CPU, and
    there is at least one."""
    key = ("weight-saves", "program")
    if key not in ctx.memo:
        verdicts: list[bool] = []
        for path, data in program_sources(ctx):
            if b"save(" in data and b"state_dict" in data:
                verdicts += ctx.project.remember(f"weight-saves:{path}", partial(_saves, data))
        ctx.memo[key] = bool(verdicts) and all(verdicts)
    return bool(ctx.memo[key])


def restores_an_optimizer(function: ast.AST, name: str) -> bool:
    """Whether ``name`` (a loaded checkpoint) feeds an optimizer in ``function``: an
    entry read under a key that names one, or ``<optimizer>.load_state_dict(name...)``."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
            and _names_an_optimizer(node.slice)
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "load_state_dict"
            and _names_an_optimizer(node.func.value)
            and any(
                isinstance(n, ast.Name) and n.id == name for a in node.args for n in ast.walk(a)
            )
        ):
            return True
    return False


def _names_an_optimizer(node: ast.AST) -> bool:
    return any(word in ast.unparse(node).lower() for word in ("optim", "opt_", "scaler"))


def _saves(data: bytes) -> list[bool]:
    """For each ``torch.save`` of model weights in a module's text, whether it writes CPU
    tensors."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    found: list[bool] = []
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        values = _assignments(scope)
        for node in _own_nodes(scope):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "save"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "torch"
                and node.args
            ):
                continue
            saved = node.args[0]
            if isinstance(saved, ast.Name) and _moved_to_cpu_in_place(scope, saved.id):
                found.append(True)
                continue
            for entry in _weight_entries(_resolved(saved, values, 0), values):
                found.append(_on_cpu(entry, values))
    return found


def _moved_to_cpu_in_place(scope: ast.AST, name: str) -> bool:
    """A loop over the dict's own items puts each entry back on the CPU (BasicSR's
    ``for key, param in state_dict.items(): state_dict[key] = param.cpu()``)."""
    for node in _own_nodes(scope):
        if not (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Attribute)
            and node.iter.func.attr == "items"
            and isinstance(node.iter.func.value, ast.Name)
            and node.iter.func.value.id == name
            and isinstance(node.target, ast.Tuple)
            and len(node.target.elts) == 2
            and all(isinstance(e, ast.Name) for e in node.target.elts)
        ):
            continue
        key, value = (cast("ast.Name", e).id for e in node.target.elts)
        for statement in node.body:
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Subscript)
                and ast.unparse(statement.targets[0]) == f"{name}[{key}]"
                and isinstance(statement.value, ast.Call)
                and isinstance(statement.value.func, ast.Attribute)
                and statement.value.func.attr == "cpu"
                and ast.unparse(statement.value.func.value).startswith(value)
            ):
                return True
    return False


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a module or function, without those of the functions inside it."""
    nodes: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        nodes.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return nodes


def _assignments(scope: ast.AST) -> dict[str, ast.expr]:
    """Each name bound exactly once by a plain assignment in the scope, with its value."""
    values: dict[str, ast.expr] = {}
    seen: set[str] = set()
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                if target.id in seen:
                    values.pop(target.id, None)
                else:
                    values[target.id] = node.value
                seen.add(target.id)
    return values


def _resolved(value: ast.expr, values: dict[str, ast.expr], depth: int) -> ast.expr:
    while isinstance(value, ast.Name) and value.id in values and depth < 3:
        value, depth = values[value.id], depth + 1
    return value


def _weight_entries(value: ast.expr, values: dict[str, ast.expr]) -> list[ast.expr]:
    """The parts of a saved value that hold a model's weights: the value itself when it
    reads a ``state_dict`` of no optimizer, or such entries of a dict literal."""
    if isinstance(value, ast.Dict):
        entries = []
        for key, entry in zip(value.keys, value.values, strict=True):
            if key is not None and _names_an_optimizer(key):
                continue
            entries += _weight_entries(_resolved(entry, values, 0), values)
        return entries
    text = ast.unparse(value)
    return [value] if "state_dict" in text and not _names_an_optimizer(value) else []


def _on_cpu(value: ast.expr, values: dict[str, ast.expr]) -> bool:
    """Everything in ``value`` is on the CPU (:func:`holds_cpu_data`), names read through
    those bound once in the scope, torch's tensor builders by their dotted name."""

    def made_on_host(call: ast.Call) -> bool:
        return ast.unparse(call.func) in _HOST_BUILDERS

    return holds_cpu_data(value, lambda name: values.get(name.id), made_on_host)


# Tensors made from host data, by the names a module's text calls them.
_HOST_BUILDERS = frozenset({"torch.tensor", "torch.from_numpy", "torch.as_tensor"})
