"""Whether a module's overridden ``train()`` can be run on a shadow without touching
anything outside it.

torchdoctor runs no code the user did not ask for. The one exception, the TD507 detector
that asks what a model's own ``train(True)`` would freeze, is allowed only for a ``train()``
whose source proves that it only sets modes and ``requires_grad`` flags: every call in it,
and in the methods of its own class it calls (three levels deep), is one of the few below,
and it assigns nothing but local names, ``requires_grad`` and ``training``. Printing and
logging are allowed because the shadow runs with them silenced (a ``print`` to a file is
not). Anything else (a file, a counter kept on a shared list, a call into another library)
and the method is not run: the detector stays quiet rather than risk the run.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

__all__ = ["train_is_pure"]

_MAX_DEPTH = 3

# Methods of modules and tensors that only read or set modes and flags.
_MODULE_METHODS = frozenset(
    {
        "train",
        "eval",
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "requires_grad_",
    }
)
# Builtins that read only.
_BUILTINS = frozenset(
    {
        "range",
        "enumerate",
        "zip",
        "len",
        "list",
        "tuple",
        "isinstance",
        "getattr",
        "hasattr",
        "any",
        "all",
        "min",
        "max",
        "reversed",
        "sorted",
        "super",
    }
)
_SILENCED_ROOTS = frozenset({"logging", "logger", "log", "warnings"})
_FLAGS = frozenset({"requires_grad", "training"})
# Statements a flag-setting method has no need of.
_REFUSED = (
    ast.Delete,
    ast.Global,
    ast.Nonlocal,
    ast.Import,
    ast.ImportFrom,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
)


def train_is_pure(cls: type) -> bool:
    """Every ``train`` that ``cls`` defines or inherits from a class outside torch (its
    ``super().train()`` reaches them), and the methods of ``cls`` they call, only set
    modes and flags."""
    owners = [
        klass
        for klass in cls.__mro__
        if "train" in vars(klass) and not klass.__module__.startswith("torch.")
    ]
    return all(_method_is_pure(cls, vars(owner)["train"], 0, set()) for owner in owners)


def _method_is_pure(cls: type, method: Any, depth: int, seen: set[int]) -> bool:
    if id(method) in seen:
        return True
    seen.add(id(method))
    function = _source_tree(method)
    if function is None:
        return False
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(_assignable(target) for target in targets):
                return False
        elif isinstance(node, _REFUSED):
            return False
        elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node is not function:
                return False
        elif isinstance(node, ast.Call) and not _call_is_pure(cls, node, depth, seen):
            return False
    return True


def _call_is_pure(cls: type, call: ast.Call, depth: int, seen: set[int]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        if func.id == "print":
            return not any(keyword.arg == "file" for keyword in call.keywords)
        return func.id in _BUILTINS
    if not isinstance(func, ast.Attribute):
        return False
    root = func.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and root.id in _SILENCED_ROOTS:
        return True
    if func.attr in _MODULE_METHODS:
        return True
    # self.helper(): a method of the same class, read the same way.
    if isinstance(func.value, ast.Name) and func.value.id == "self" and depth < _MAX_DEPTH:
        method = getattr(cls, func.attr, None)
        return callable(method) and _method_is_pure(cls, method, depth + 1, seen)
    return False


def _assignable(target: ast.expr) -> bool:
    """A local name (or a tuple of them), or a ``requires_grad`` / ``training`` flag."""
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_assignable(element) for element in target.elts)
    return isinstance(target, ast.Attribute) and target.attr in _FLAGS


def _source_tree(method: Any) -> ast.FunctionDef | None:
    function = getattr(method, "__func__", method)
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.FunctionDef) else None
