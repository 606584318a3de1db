"""What produced a loss input: a softmax, log_softmax or sigmoid, or a layer's raw scores.

:func:`origin_of` follows a value back through local variables (only assignments that
surely ran), shape-keeping tensor methods (``.view()``, ``.squeeze()``), activation
layers, the last layer of an ``nn.Sequential`` and the ``forward`` of a model class of the
same file, and says which activation made it, and where. The loss rules (TD301-TD305) pair
it with the loss that receives the value.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import returns_of
from torchdoctor.static.structure import FunctionScope
from torchdoctor.static.values import bound_value, constructor_of

__all__ = ["Activation", "Origin", "argument", "origin_of"]


class Activation(enum.Enum):
    """What produced a loss input."""

    SOFTMAX = "softmax"
    LOG_SOFTMAX = "log_softmax"
    SIGMOID = "sigmoid"
    RAW = "raw scores"  # a linear or convolution layer's output


_ACTIVATION_CALLS = {
    **{name: Activation(ending) for name, ending in torchapi.ACTIVATION_FUNCTIONS.items()},
    **dict.fromkeys(torchapi.RAW_SCORE_FUNCTIONS, Activation.RAW),
}
_ACTIVATION_METHODS = {name: Activation(name) for name in torchapi.ACTIVATION_METHODS}
_ACTIVATION_MODULES = {
    name: Activation(ending) for name, ending in torchapi.ACTIVATION_LAYERS.items()
}
_RAW_MODULES = torchapi.RAW_SCORE_LAYERS
# Tensor methods that keep what a value means (probabilities stay probabilities). Not
# `detach`: a loss of detached values trains nothing, it is a metric.
_KEEPS_MEANING = frozenset(
    {
        "squeeze",
        "unsqueeze",
        "view",
        "reshape",
        "flatten",
        "contiguous",
        "permute",
        "transpose",
        "float",
        "double",
        "half",
        "to",
        "type",
        "view_as",
        "reshape_as",
        "clone",
        "squeeze_",
        "unsqueeze_",
        "cpu",
        "cuda",
    }
)
_MAX_DEPTH = 6


@dataclass(frozen=True, slots=True)
class Origin:
    """What produced a value: the activation, where, and (for a direct call) its input."""

    activation: Activation
    node: ast.AST
    inner: ast.expr | None
    where: str


def argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    """A call's argument by position, or by keyword when it is not given by position."""
    if len(call.args) > index and not any(
        isinstance(a, ast.Starred) for a in call.args[: index + 1]
    ):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def origin_of(ctx: FileContext, expr: ast.expr, scope: Scope, depth: int = 0) -> Origin | None:
    """What produced ``expr``'s value, when the file shows it; ``None`` when unknown."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Subscript):
        return origin_of(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Name):
        source = bound_value(ctx, expr, scope)
        if source is None:
            return None
        origin = origin_of(ctx, source[0], source[1], depth + 1)
        if origin is None or origin.inner is None:
            return origin
        return Origin(origin.activation, origin.node, None, origin.where)
    if isinstance(expr, ast.Call):
        return _call_origin(ctx, expr, scope, depth)
    return None


def _call_origin(ctx: FileContext, call: ast.Call, scope: Scope, depth: int) -> Origin | None:
    func = call.func
    qualified = ctx.qualified_name(func, scope)
    where = f"from line {call.lineno}"
    if qualified is not None:
        activation = _ACTIVATION_CALLS.get(qualified)
        if activation is not None:
            return Origin(activation, call, argument(call, 0, "input"), where)
        if qualified == "torch.log":
            return _log_of(ctx, argument(call, 0, "input"), call, scope, depth)
        return None
    if isinstance(func, ast.Attribute):
        activation = _ACTIVATION_METHODS.get(func.attr)
        if activation is not None:
            return Origin(activation, call, func.value, where)
        if func.attr == "log" and not call.args:
            return _log_of(ctx, func.value, call, scope, depth)
        if func.attr in _KEEPS_MEANING:
            inner = origin_of(ctx, func.value, scope, depth + 1)
            return (
                None if inner is None else Origin(inner.activation, inner.node, None, inner.where)
            )
    return _module_origin(ctx, call, scope, depth)


def _log_of(
    ctx: FileContext, inner: ast.expr | None, call: ast.Call, scope: Scope, depth: int
) -> Origin | None:
    """``log(softmax(x))`` is a (less stable) log_softmax."""
    origin = None if inner is None else origin_of(ctx, inner, scope, depth + 1)
    if origin is not None and origin.activation is Activation.SOFTMAX:
        return Origin(Activation.LOG_SOFTMAX, call, None, f"from line {call.lineno}")
    return None


def _module_origin(ctx: FileContext, call: ast.Call, scope: Scope, depth: int) -> Origin | None:
    """The output of calling a module: an activation layer, a Sequential, a local model."""
    if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
        return None
    own = _own_forward(ctx, call.func, scope)
    if own is not None:  # self(x) in a method of a local model: its own forward
        return _forward_origin(ctx, own, depth)
    type_name = ctx.instance_type(call.func, scope)
    if type_name is None:
        return None
    inner = call.args[0] if call.args else None
    return _module_output(ctx, type_name, call.func, call, inner, scope, depth)


def _module_output(
    ctx: FileContext,
    type_name: str,
    module: ast.expr,
    call: ast.AST,
    inner: ast.expr | None,
    scope: Scope,
    depth: int,
) -> Origin | None:
    where = f"from line {getattr(call, 'lineno', 0)}"
    if type_name in _ACTIVATION_MODULES:
        return Origin(_ACTIVATION_MODULES[type_name], call, inner, where)
    if type_name in _RAW_MODULES:
        return Origin(Activation.RAW, call, None, where)
    if type_name == "torch.nn.Sequential":
        built = constructor_of(ctx, module, scope)
        if built is None or not built.args or isinstance(built.args[-1], ast.Starred):
            return None
        last = built.args[-1]
        last_type = ctx.instance_type(last, scope)
        if last_type is None:
            return None
        origin = _module_output(ctx, last_type, last, last, None, scope, depth + 1)
        if origin is None:
            return None
        name = ctx.segment(last) if len(ctx.segment(last)) <= 40 else last_type
        return Origin(
            origin.activation,
            last,
            None,
            f"of the last layer of the `nn.Sequential` at line {built.lineno} (`{name}`)",
        )
    if type_name.startswith("<local>."):
        return _forward_origin(ctx, type_name[len("<local>.") :], depth)
    return None


def _own_forward(ctx: FileContext, func: ast.expr, scope: Scope) -> str | None:
    """The class whose ``forward`` ``self(...)`` runs, inside a method of a local class
    that defines it (``training_step`` calling ``self(x)``, Lightning style)."""
    if not (isinstance(scope, FunctionScope) and isinstance(func, ast.Name)):
        return None
    if scope.owner is None or func.id != scope.self_name:
        return None
    cls = ctx.local_class(scope.owner.name)
    return None if cls is None or "forward" not in cls.methods else cls.name


def _forward_origin(ctx: FileContext, class_name: str, depth: int) -> Origin | None:
    """What every ``return`` of a local model's ``forward`` gives, when they all agree."""
    cls = ctx.local_class(class_name)
    forward = None if cls is None else cls.methods.get("forward")
    if forward is None:
        return None
    returns = [
        r for r in sorted(returns_of(forward.node), key=lambda r: r.lineno) if r.value is not None
    ]
    origins = [origin_of(ctx, r.value, forward, depth + 1) for r in returns if r.value]
    if not origins or any(o is None for o in origins):
        return None
    kinds = {o.activation for o in origins if o is not None}
    if len(kinds) != 1:
        return None
    return Origin(
        kinds.pop(),
        forward.node,
        None,
        f"of the `forward` of `{class_name}` (line {returns[-1].lineno})",
    )
