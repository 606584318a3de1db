"""Whether an optimizer a function builds can still step once a given statement has run.

TD610 speaks of parameters an optimizer misses; that matters only if the optimizer steps
after they were replaced. A local optimizer whose last use is behind the replacement (a
task's training done, the network then rebuilt for the next task) misses nothing.
"""

from __future__ import annotations

import ast

from torchdoctor.static.analysis.callers import called_function
from torchdoctor.static.branches import if_arms, on_opposite_arms
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope, Item

__all__ = ["used_after"]

# Methods that put an argument into a container the function may read from later.
_STORING_METHODS = frozenset(
    {"append", "extend", "insert", "add", "update", "setdefault", "put", "register"}
)


def used_after(ctx: FileContext, scope: Scope, built: Item, after: Item) -> bool:
    """Whether the optimizer ``built`` binds may step once ``after`` has run.

    ``False`` only for a plain local name of a function when neither it nor anything made
    from it (a scheduler, a trainer handed it) is read after ``after``, in a loop around
    ``after`` or in a nested function, and none of them is kept where the function cannot
    follow it (an attribute, a container, a method of the file that stores it). Anything
    else counts as used: the rule then speaks as before."""
    if not isinstance(scope, FunctionScope):
        return True
    node = built.node
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target: ast.expr = node.targets[0]
    elif isinstance(node, ast.AnnAssign):
        target = node.target
    else:
        return True
    if not isinstance(target, ast.Name):
        return True
    function = scope.node
    holders = _holders(ctx, scope, {target.id})
    if holders is None:
        return True
    end = getattr(after.node, "end_lineno", None) or after.line
    around = [
        loop
        for loop in ast.walk(function)
        if isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
        and loop.lineno <= after.line <= (loop.end_lineno or loop.lineno)
    ]
    nested = [
        inner
        for inner in ast.walk(function)
        if inner is not function
        and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    ]
    arms = if_arms(function)
    for sub in ast.walk(function):
        if isinstance(sub, (ast.Global, ast.Nonlocal)) and holders & set(sub.names):
            return True
        if not (isinstance(sub, ast.Name) and sub.id in holders):
            continue
        if isinstance(sub.ctx, ast.Store):
            continue
        if any(_within(sub, block) for block in around + nested):
            return True
        if sub.lineno > end and not on_opposite_arms(arms, after.line, sub.lineno):
            return True  # read later, and not only on the other side of an `if` around both
    return False


def _holders(ctx: FileContext, scope: FunctionScope, names: set[str]) -> set[str] | None:
    """``names`` with every local name bound from them (``scheduler =
    StepLR(optimizer)``) or an object they were handed to (``engine.attach(optimizer)``),
    to a fixed point; ``None`` when one of them is kept out of the function's sight."""
    holders = set(names)
    changed = True
    while changed:
        changed = False
        for sub in ast.walk(scope.node):
            if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                if sub.value is None or not _reads(sub.value, holders):
                    continue
                if _result_is_free(ctx, scope, sub.value, holders):
                    continue  # `loss = self._run(optimizer)`: a helper's plain result
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for bound in targets:
                    if not isinstance(bound, ast.Name):
                        return None  # stored in an attribute or a container
                    if bound.id not in holders:
                        holders.add(bound.id)
                        changed = True
            elif isinstance(sub, ast.Call):
                handed = [*sub.args, *(k.value for k in sub.keywords)]
                if not any(_reads(value, holders) for value in handed):
                    continue
                kept = _kept_by_call(ctx, scope, sub, holders)
                if kept is None:
                    return None
                if kept not in holders and kept:
                    holders.add(kept)
                    changed = True
    return holders


def _kept_by_call(
    ctx: FileContext, scope: FunctionScope, call: ast.Call, holders: set[str]
) -> str | None:
    """For a call handed a holder: ``None`` when it stores it out of sight, the name of a
    receiver that may keep it (``trainer`` of ``trainer.setup(optimizer)``), else ``""``."""
    func = call.func
    if isinstance(func, ast.Attribute) and _reads(func.value, holders):
        return ""  # a method of the optimizer itself, or of a scheduler made from it
    if isinstance(func, ast.Attribute) and func.attr in _STORING_METHODS:
        return None
    helper = called_function(ctx, call, scope)
    if helper is not None:
        return None if _helper_keeps(helper, call, holders) else ""
    if isinstance(func, ast.Attribute) and ctx.qualified_name(func, scope) is None:
        root = func.value
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name):
            return root.id
        return None
    return ""


def _result_is_free(
    ctx: FileContext, scope: FunctionScope, value: ast.expr, holders: set[str]
) -> bool:
    """``value`` calls a function of the file that neither keeps nor returns what it
    is handed, with no holder read outside the call's arguments."""
    if not isinstance(value, ast.Call) or _reads(value.func, holders):
        return False
    helper = called_function(ctx, value, scope)
    return helper is not None and not _helper_keeps(helper, value, holders)


def _helper_keeps(helper: FunctionScope, call: ast.Call, holders: set[str]) -> bool:
    """Whether a function of the file keeps what it is handed: one of the parameters
    the call fills with a holder is assigned to anything but a plain name, put into a
    container, handed on to a method of another object, returned or yielded."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return True
    arguments = helper.node.args
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    if helper.self_name is not None and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    filled = {
        positional[i]
        for i, value in enumerate(call.args)
        if i < len(positional) and _reads(value, holders)
    }
    if any(i >= len(positional) and _reads(v, holders) for i, v in enumerate(call.args)):
        return True  # into *args
    filled |= {k.arg for k in call.keywords if k.arg is not None and _reads(k.value, holders)}
    for sub in ast.walk(helper.node):  # local names it passes through (`opt = optimizer`)
        if isinstance(sub, ast.Assign) and _reads(sub.value, filled):
            filled |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
    for sub in ast.walk(helper.node):
        if isinstance(sub, (ast.Return, ast.Yield, ast.YieldFrom)):
            if sub.value is not None and _reads(sub.value, filled):
                return True
        elif isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if (
                sub.value is not None
                and _reads(sub.value, filled)
                and not all(isinstance(t, ast.Name) for t in targets)
            ):
                return True
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            handed = [*sub.args, *(k.value for k in sub.keywords)]
            if any(_reads(value, filled) for value in handed) and not _reads(
                sub.func.value, filled
            ):
                return True
    return False


def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(sub, ast.Name) and sub.id in names for sub in ast.walk(node))


def _within(node: ast.expr, block: ast.AST) -> bool:
    start = getattr(block, "lineno", 0)
    stop = getattr(block, "end_lineno", None) or start
    return start <= node.lineno <= stop
