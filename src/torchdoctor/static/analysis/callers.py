"""Following calls between the functions of one file, both ways.

:func:`called_function` is the function or method of the file a call runs (``f()``,
``self.f()``, ``obj.f()`` on an instance of a class of the file); :func:`passed_values`
goes the other way, from a parameter to what the file's callers pass for it;
:func:`constant_arguments` gives the parameters one call fixes to literal constants (the
flags that decide a helper's branches for that call).
"""

from __future__ import annotations

import ast

from torchdoctor.static.analysis.calls import assigned_names, keyword
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.project import PLAIN_BASES
from torchdoctor.static.structure import FunctionScope

__all__ = [
    "Passed",
    "called_function",
    "constant_arguments",
    "is_spawn",
    "local_method",
    "passed_values",
    "spawned_argument",
]


def called_function(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    """The local function or method a call runs: ``f()``, ``self.f()``, or ``obj.f()`` on
    an instance of a class of this file."""
    found = ctx.resolve_local_call(call, scope)
    if found is not None or not isinstance(call.func, ast.Attribute):
        return found
    type_name = ctx.instance_type(call.func.value, scope)
    if type_name is None or not type_name.startswith("<local>."):
        return None
    cls = ctx.local_class(type_name[len("<local>.") :])
    return cls.methods.get(call.func.attr) if cls is not None else None


Passed = tuple[ast.expr, Scope, ast.Call]  # an argument, the caller's scope, the call


def passed_values(ctx: FileContext, name: ast.Name, scope: Scope) -> list[Passed]:
    """What the file's callers pass for the parameter ``name`` of function ``scope``."""
    if not isinstance(scope, FunctionScope):
        return []
    found = ctx.lookup(name, scope)
    if found is None or found[0].kind is not BindingKind.PARAMETER or found[1] is not scope:
        return []
    out = []
    for caller, item in ctx.callers(scope):
        call = item.node
        if isinstance(call, ast.Call):
            value = scope.argument_for(call, name.id)
            if value is not None:
                out.append((value, caller, call))
    return out


def constant_arguments(call: ast.Call, callee: FunctionScope) -> dict[str, object]:
    """The callee's parameters whose value at ``call`` is a literal constant: passed as
    one (by position or keyword) or left to a constant default; none that the callee
    rebinds."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return {}
    args = callee.node.args
    params = callee.positional_names(call)
    given: dict[str, ast.expr] = dict(zip(params, call.args, strict=False))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    defaults = callee.parameter_defaults
    out: dict[str, object] = {}
    for name in [*params, *(a.arg for a in args.kwonlyargs)]:
        value = given.get(name, defaults.get(name))
        if isinstance(value, ast.Constant):
            out[name] = value.value
    if out:  # a parameter the helper rebinds is no longer what the call passed
        for item in callee.items:
            for bound in assigned_names(item.node):
                out.pop(bound, None)
    return out


# Launchers that run a function in each of the processes they start.
_SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


def is_spawn(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """``mp.spawn(fn, ...)`` or ``start_processes``, through any import of
    ``torch.multiprocessing``: a call that runs ``fn`` in every process it starts."""
    return ctx.qualified_name(call.func, scope) in _SPAWNERS


def spawned_argument(call: ast.Call) -> ast.expr | None:
    """The function a spawn call hands its processes, as written (``fn=`` too)."""
    return call.args[0] if call.args else getattr(keyword(call, "fn"), "value", None)


def spawned_function(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    """The function of the file that ``mp.spawn(main_worker, nprocs=...)`` runs in every
    process it starts, when ``call`` is such a launch."""
    if not is_spawn(ctx, call, scope):
        return None
    target = spawned_argument(call)
    if not isinstance(target, ast.Name):
        return None
    return ctx.resolve_local_call(ast.Call(func=target, args=[], keywords=[]), scope)


def local_method(
    ctx: FileContext, class_name: str, method: str, depth: int = 0
) -> FunctionScope | None:
    """The method a class of this file runs for ``method``: its own, or one of a base of
    this file, in the order of the bases; ``None`` when a base it cannot read (not
    ``object`` or ``nn.Module``) may define it first."""
    cls = ctx.local_class(class_name)
    if cls is None or depth > _MAX_BASES:
        return None
    if method in cls.methods:
        return cls.methods[method]
    for base in cls.node.bases:
        if isinstance(base, ast.Name) and ctx.local_class(base.id) is not None:
            found = local_method(ctx, base.id, method, depth + 1)
            if found is not None:
                return found
        elif ctx.qualified_name(base) not in PLAIN_BASES:
            return None
    return None


_MAX_BASES = 6  # how deep a chain of the file's base classes is followed
