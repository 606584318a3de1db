"""Whether a model behaves differently in train and eval mode, when the file shows it.

Only a model whose class the project defines can be proven insensitive: if its class
(and the project classes it builds or derives from) creates no dropout, normalisation
with running statistics, or layer with built-in dropout, and never reads
``self.training``, ``eval()`` changes nothing and the mode rules stay quiet. Anything
else is assumed sensitive. An instance norm is
mode-free unless it tracks running statistics, and even then it computes the right
thing in training mode: evaluating without ``eval()`` (TD501) is wrong only for dropout
and batch statistics.
"""

from __future__ import annotations

import ast

from torchdoctor.static import torchapi
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import returns_of
from torchdoctor.static.project import ClassInfo
from torchdoctor.static.project_facts import only_picks_outputs
from torchdoctor.static.structure import FunctionScope
from torchdoctor.static.torchapi import MODE_SENSITIVE_FUNCTIONS, MODE_SENSITIVE_WORDS

__all__ = ["is_mode_sensitive", "proven_mode_sensitive"]

# Attention's own dropout counts here too: a model calling it is judged sensitive.
_SENSITIVE_FUNCTIONS = MODE_SENSITIVE_FUNCTIONS | {
    "torch.nn.functional.scaled_dot_product_attention"
}


def is_mode_sensitive(ctx: FileContext, model: ast.expr | None, scope: Scope) -> bool:
    """``False`` only when ``model`` is an instance of a class of this file, or of another
    module of the project, that provably has no mode-dependent layer (physicsnemo's FNO:
    spectral convolutions and activations); ``True`` otherwise."""
    if model is None:
        return True
    type_name = ctx.instance_type(model, scope)
    if type_name is None:
        return True
    if type_name.startswith("<local>."):
        return _class_sensitive(ctx, type_name[len("<local>.") :], set())
    info = ctx.project.module_class(type_name, near=ctx.path)
    return (
        info is None
        or info.is_module is not True
        or info.has_dropout_or_batchnorm is not False
        or _layers_held_outside(ctx, info)
    )


def proven_mode_sensitive(ctx: FileContext, model: ast.expr | None, scope: Scope) -> bool:
    """``True`` only when the code shows that ``model`` has dropout or batch norm (or a
    layer with them built in, or branches on ``self.training``; not an instance norm,
    whose training-mode output is the per-sample one evaluation wants): a class of the
    project whose layers say so (through the project index), such a torch layer, or a
    ``Sequential`` holding one; followed through assignments, ``.to()`` chains, the
    values local functions return and, for a parameter, what this file's callers pass.
    A loss, a generator, a callable of unknown kind: ``False``."""
    return model is not None and _value_sensitive(ctx, model, scope, 0)


_CONTAINERS = torchapi.CONTAINERS
_SELF_RETURNING = frozenset(
    {"to", "cuda", "cpu", "train", "float", "half", "bfloat16", "double", "requires_grad_"}
)


def _value_sensitive(ctx: FileContext, expr: ast.expr, scope: Scope, depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, ast.Call):
        return _call_value_sensitive(ctx, expr, scope, depth)
    if isinstance(expr, (ast.List, ast.Tuple)):
        return any(_value_sensitive(ctx, e, scope, depth + 1) for e in expr.elts)
    found = None
    if isinstance(expr, ast.Name):
        found = ctx.lookup(expr, scope)
    elif isinstance(expr, ast.Attribute):
        found = ctx.attribute_binding(expr, scope)
    if found is None:
        return False
    binding, owner = found
    if binding.kind is BindingKind.PARAMETER and isinstance(expr, ast.Name) and owner:
        return _passed_sensitive(ctx, expr.id, owner, depth)
    if binding.kind in (BindingKind.ASSIGN, BindingKind.WITH_TARGET) and binding.value:
        return _value_sensitive(ctx, binding.value, owner, depth + 1)
    if binding.kind is BindingKind.UNPACKED and isinstance(expr, ast.Name):
        return _unpacked_sensitive(ctx, expr.id, binding.node, owner, depth)
    return False


def _unpacked_sensitive(
    ctx: FileContext, name: str, statement: ast.AST, scope: Scope, depth: int
) -> bool:
    """``model, loader, loss_fn = make()``: the matching element of what the local
    function returns (the factory shape of training scripts)."""
    if not isinstance(statement, ast.Assign) or not isinstance(statement.value, ast.Call):
        return False
    for target in statement.targets:
        if not isinstance(target, (ast.Tuple, ast.List)):
            continue
        if any(isinstance(e, ast.Starred) for e in target.elts):
            return False
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        if name in names:
            index, width = names.index(name), len(names)
            break
    else:
        return False
    local = ctx.resolve_local_call(statement.value, scope)
    if local is None:
        return False
    return any(
        isinstance(r.value, (ast.Tuple, ast.List))
        and len(r.value.elts) == width
        and _value_sensitive(ctx, r.value.elts[index], local, depth + 1)
        for r in returns_of(local.node)
    )


def _call_value_sensitive(ctx: FileContext, call: ast.Call, scope: Scope, depth: int) -> bool:
    func = call.func
    qualified = ctx.qualified_name(func, scope)
    if qualified in _CONTAINERS or qualified in ("torch.compile", "torch.jit.script"):
        return any(_value_sensitive(ctx, a, scope, depth + 1) for a in call.args)
    if qualified is None and isinstance(func, ast.Attribute) and func.attr in _SELF_RETURNING:
        return _value_sensitive(ctx, func.value, scope, depth + 1)
    local = ctx.resolve_local_call(call, scope)
    if local is not None:
        return any(
            _value_sensitive(ctx, r.value, local, depth + 1)
            for r in returns_of(local.node)
            if r.value is not None
        )
    type_name = ctx.instance_type(call, scope)
    if type_name is None:
        return False
    info = ctx.project.module_class(type_name, near=ctx.path)
    if info is not None:
        return bool(info.wrong_in_train_mode) and not _layers_held_outside(ctx, info)
    if torchapi.without_dropout(type_name, call) or torchapi.train_mode_exact(type_name, call):
        return False
    last = type_name.rpartition(".")[2]
    return (
        type_name.startswith("torch.nn.")
        and not type_name.startswith("torch.nn.functional")
        and any(word in last for word in MODE_SENSITIVE_WORDS)
    )


def _layers_held_outside(ctx: FileContext, info: ClassInfo) -> bool:
    """The class keeps mode-sensitive layers in an attribute that is a plain object of
    the project, not a module (``self.model = DistModel()``, whose own code builds and
    may ``eval()`` its network): ``.train()``/``.eval()`` of the module never reach those
    layers, so the mode they run in cannot be told from the module's."""
    for constructor in info.attributes.values():
        held = ctx.project.module_class(constructor, near=info.path)
        if held is not None and held.is_module is False and held.has_dropout_or_batchnorm:
            return True
    return False


def _passed_sensitive(ctx: FileContext, name: str, function: FunctionScope, depth: int) -> bool:
    """Whether a caller of ``function`` in this file passes a sensitive model as ``name``."""
    for caller, item in ctx.callers(function):
        call = item.node
        if not isinstance(call, ast.Call):
            continue
        passed = dict(zip(function.positional_names(call), call.args, strict=False))
        passed.update({k.arg: k.value for k in call.keywords if k.arg})
        value = passed.get(name)
        if value is not None and _value_sensitive(ctx, value, caller, depth + 1):
            return True
    return False


def _class_sensitive(ctx: FileContext, name: str, seen: set[str]) -> bool:
    cls = ctx.local_class(name)
    if cls is None or name in seen:
        return cls is None
    seen.add(name)
    for base in cls.node.bases:
        if (
            isinstance(base, ast.Name)
            and ctx.local_class(base.id) is not None
            and _class_sensitive(ctx, base.id, seen)
        ):
            return True
    picking: set[int] | None = None  # read at the first `.training`, if the class has one
    for node in ast.walk(cls.node):
        if isinstance(node, ast.Call) and _call_sensitive(ctx, node, seen):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "training":
            if picking is None:
                picking = _mode_tests_picking_outputs(cls.node)
            if id(node) not in picking:
                return True  # the class branches on its own mode
    return False


def _mode_tests_picking_outputs(cls: ast.ClassDef) -> set[int]:
    """The ``.training`` reads of ``if self.training: return a, b`` / ``return a`` in the
    class's methods: the mode picks outputs there, not values."""
    return {
        id(getattr(node.test, "operand", node.test))
        for method in cls.body
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(method)
        if isinstance(node, ast.If) and only_picks_outputs(node, method)
    }


def _call_sensitive(ctx: FileContext, call: ast.Call, seen: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name) and ctx.local_class(func.id) is not None:
        return _class_sensitive(ctx, func.id, seen)
    qualified = ctx.qualified_name(func, None)
    if qualified is None:
        return False
    if qualified in _SENSITIVE_FUNCTIONS:
        return not torchapi.without_dropout(qualified, call)
    if torchapi.without_dropout(qualified, call):
        return False
    last = qualified.rpartition(".")[2]
    if qualified.startswith("torch.nn.") and last[:1].isupper():
        return any(word in last for word in MODE_SENSITIVE_WORDS)
    # A layer or model from elsewhere (torchvision, timm, ...): assume it may be.
    return last[:1].isupper() and not qualified.startswith("torch.")
