"""What produced a loss input: a softmax, log_softmax or sigmoid, or a layer's raw scores.

:func:`origin_of` follows a value back through local variables (only assignments that
surely ran), shape-keeping tensor methods (``.view()``, ``.squeeze()``), activation
layers, the last layer of an ``nn.Sequential``, and the project's own code: a function of
the file, the ``forward`` of a model class, or any method called on an instance of one
(``model.scores(x)``, ``self.predict(x)``), in this file (read here) or in another linted
file (what the project index says its ``return`` applies last). A returned tuple is
followed into the item taken from it (``probs, _ = model.scores(x)``,
``model.scores(x)[0]``). Every ``return`` must agree, and a method that a class of the
project deriving from the instance's class overrides is not guessed. It says which
activation made the value, and where; the loss rules (TD301-TD305) pair it with the loss
that receives the value.
"""

from __future__ import annotations

import ast
import enum
import os
from dataclasses import dataclass

from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import local_method
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import conditional
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.names import returns_of
from torchdoctor.static.project import ClassInfo
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
_KEEPS_MEANING = torchapi.MEANING_KEEPING_METHODS
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
        index = _constant_index(expr.slice)
        if index is not None:  # model.scores(x)[0]: an item of a returned tuple
            item = _item_origin(ctx, expr.value, index, scope, depth + 1)
            if item is not None:
                return item
        return origin_of(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Name):
        unpacked = _unpacked_from(ctx, expr, scope)
        if unpacked is not None:  # probs, _ = model.scores(x)
            call, index, owner = unpacked
            origin = _returned_by_call(ctx, call, owner, depth + 1, index)
        else:
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


def _constant_index(index: ast.expr) -> int | None:
    if isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0:
        return index.value
    return None


def _item_origin(
    ctx: FileContext, value: ast.expr, index: int, scope: Scope, depth: int
) -> Origin | None:
    """Item ``index`` of the tuple a call of the project returns (``value`` the call, or
    a name bound to it)."""
    if isinstance(value, ast.Name):
        source = bound_value(ctx, value, scope)
        if source is None:
            return None
        value, scope = source
    if not isinstance(value, ast.Call):
        return None
    return _returned_by_call(ctx, value, scope, depth, index)


def _unpacked_from(
    ctx: FileContext, name: ast.Name, scope: Scope
) -> tuple[ast.Call, int, Scope] | None:
    """``a, b = f(...)`` (an assignment that surely ran): the call ``name`` is unpacked
    from, its position among the targets, and the scope of the assignment."""
    found = ctx.lookup(name, scope)
    if found is None or found[0].kind is not BindingKind.UNPACKED:
        return None
    binding, owner = found
    statement, value = binding.node, binding.value
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], (ast.Tuple, ast.List))
        and isinstance(value, ast.Call)
    ):
        return None
    targets = statement.targets[0].elts
    if any(isinstance(t, ast.Starred) for t in targets):
        return None
    positions = [i for i, t in enumerate(targets) if isinstance(t, ast.Name) and t.id == name.id]
    if len(positions) != 1 or conditional(ctx, statement, name, owner):
        return None
    return value, positions[0], owner


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
        if activation is not None and not _on_self(func.value, scope):
            return Origin(activation, call, func.value, where)
        if func.attr == "log" and not call.args:
            return _log_of(ctx, func.value, call, scope, depth)
        if func.attr in _KEEPS_MEANING:
            inner = origin_of(ctx, func.value, scope, depth + 1)
            return (
                None if inner is None else Origin(inner.activation, inner.node, None, inner.where)
            )
    return _returned_by_call(ctx, call, scope, depth, None)


def _on_self(receiver: ast.expr, scope: Scope) -> bool:
    """``self.softmax(x)``: a layer of the module (``self.softmax = nn.LogSoftmax()`` is
    one), not the tensor method ``x.softmax(dim)``; what it is comes from its binding."""
    owner = scope.self_name if isinstance(scope, FunctionScope) else None
    return isinstance(receiver, ast.Name) and owner is not None and receiver.id == owner


def _log_of(
    ctx: FileContext, inner: ast.expr | None, call: ast.Call, scope: Scope, depth: int
) -> Origin | None:
    """``log(softmax(x))`` is a (less stable) log_softmax."""
    origin = None if inner is None else origin_of(ctx, inner, scope, depth + 1)
    if origin is not None and origin.activation is Activation.SOFTMAX:
        return Origin(Activation.LOG_SOFTMAX, call, None, f"from line {call.lineno}")
    return None


def _returned_by_call(
    ctx: FileContext, call: ast.Call, scope: Scope, depth: int, index: int | None
) -> Origin | None:
    """What a call of the project's own code returns (item ``index`` of a returned tuple,
    when given): a function of the file, a method called on an instance of a project
    class (``self.predict(x)``, ``model.scores(x)``), or a module's forward."""
    func = call.func
    if ctx.qualified_name(func, scope) is not None:
        return None  # a library's function
    if isinstance(func, ast.Name):
        function = ctx.resolve_local_call(call, scope)
        if function is not None:  # a function of this file
            return _returned(ctx, function, index, depth, f"`{function.name}`")
    if isinstance(func, ast.Attribute):
        method = _called_method(ctx, func, scope)
        if method is not None:
            return _method_result(ctx, method, func.attr, call, depth, index)
    return _module_origin(ctx, call, scope, depth, index)


# A method of a class of this file (the class's name and the method), or the class of
# another linted file that has it.
_Method = tuple[str, FunctionScope] | ClassInfo


def _called_method(ctx: FileContext, func: ast.Attribute, scope: Scope) -> _Method | None:
    """The method ``instance.method(...)`` runs, when the instance's class is one of the
    project's and the method is its own or inherited from a base of the project."""
    owner = _owner_class(ctx, func.value, scope)
    if owner is None:
        return None
    if owner.startswith("<local>."):
        class_name = owner[len("<local>.") :]
        method = local_method(ctx, class_name, func.attr)
        return None if method is None else (class_name, method)
    info = _project_class(ctx, owner)
    return info if info is not None and info.method_site(func.attr) is not None else None


def _method_result(
    ctx: FileContext, method: _Method, name: str, call: ast.Call, depth: int, index: int | None
) -> Origin | None:
    """What every ``return`` of the method gives: read here for a class of this file,
    from the project index for another file's. ``None`` when a class of the project that
    derives from the instance's class overrides the method (the instance may be one)."""
    if isinstance(method, ClassInfo):
        path, line = method.method_site(name) or (method.path, method.line)
        where = f"of `{method.name}.{name}` ({os.path.basename(path)}:{line}"
        return _project_origin(method.method_ends_in(name, index), call, where, index)
    class_name, function = method
    info = ctx.project.module_class(f"<local>.{class_name}", near=ctx.path)
    if info is None or info.overridden(name):
        return None
    return _returned(ctx, function, index, depth, f"`{class_name}.{name}`")


def _owner_class(ctx: FileContext, value: ast.expr, scope: Scope) -> str | None:
    """The class of the instance a method is called on: ``self`` inside a method of a
    class of this file, else what :meth:`instance_type` finds."""
    if (
        isinstance(scope, FunctionScope)
        and scope.owner is not None
        and isinstance(value, ast.Name)
        and value.id == scope.self_name
    ):
        return f"<local>.{scope.owner.name}"
    type_name = ctx.instance_type(value, scope)
    return None if type_name is None or type_name.startswith("torch.") else type_name


def _project_class(ctx: FileContext, type_name: str) -> ClassInfo | None:
    """A class of another linted file. ``"models.net.Net"`` may be indexed as
    ``"net.Net"``: the bare name then decides, when a single class of the project has it."""
    if type_name.startswith("<local>."):
        return None
    return ctx.project_class_named(type_name) or ctx.project_class_named(
        type_name.rpartition(".")[2]
    )


def _project_origin(
    ending: str | None, call: ast.AST, where: str, index: int | None
) -> Origin | None:
    activation = _ENDINGS.get(ending or "")
    if activation is None:
        return None
    where += ")" if index is None else f", item {index} of the tuple it returns)"
    return Origin(activation, call, None, where)


_ENDINGS = {name: Activation(name) for name in torchapi.ACTIVATION_METHODS}


def _module_origin(
    ctx: FileContext, call: ast.Call, scope: Scope, depth: int, index: int | None = None
) -> Origin | None:
    """The output of calling a module: an activation layer, a Sequential, a model of this
    file or of another linted file."""
    if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
        return None
    own = _own_forward(ctx, call.func, scope)
    if own is not None:  # self(x) in a method of a local model: its own forward
        return _forward_origin(ctx, own, depth, index)
    type_name = ctx.instance_type(call.func, scope)
    if type_name is None:
        return None
    if index is not None:  # a tuple: only a model's forward returns one
        return _model_output(ctx, type_name, call, depth, index)
    inner = call.args[0] if call.args else None
    return _module_output(ctx, type_name, call.func, call, inner, scope, depth)


def _model_output(
    ctx: FileContext, type_name: str, call: ast.AST, depth: int, index: int | None
) -> Origin | None:
    """What the ``forward`` of a model class of the project returns."""
    if type_name.startswith("<local>."):
        return _forward_origin(ctx, type_name[len("<local>.") :], depth, index)
    if type_name.startswith("torch."):
        return None
    info = _project_class(ctx, type_name)
    if info is None:
        return None
    ending = info.forward_ends_in if index is None else info.method_ends_in("forward", index)
    where = f"of the `forward` of `{info.name}` ({os.path.basename(info.path)}:{info.line}"
    return _project_origin(ending, call, where, index)


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
    return _model_output(ctx, type_name, call, depth, None)


def _own_forward(ctx: FileContext, func: ast.expr, scope: Scope) -> str | None:
    """The class whose ``forward`` ``self(...)`` runs, inside a method of a local class
    that defines it (``training_step`` calling ``self(x)``, Lightning style)."""
    if not (isinstance(scope, FunctionScope) and isinstance(func, ast.Name)):
        return None
    if scope.owner is None or func.id != scope.self_name:
        return None
    cls = ctx.local_class(scope.owner.name)
    return None if cls is None or "forward" not in cls.methods else cls.name


def _forward_origin(
    ctx: FileContext, class_name: str, depth: int, index: int | None = None
) -> Origin | None:
    """What every ``return`` of a local model's ``forward`` gives, when they all agree."""
    cls = ctx.local_class(class_name)
    forward = None if cls is None else cls.methods.get("forward")
    if forward is None:
        return None
    return _returned(ctx, forward, index, depth, f"the `forward` of `{class_name}`")


def _returned(
    ctx: FileContext, function: FunctionScope, index: int | None, depth: int, label: str
) -> Origin | None:
    """What every ``return`` of a function of this file gives (item ``index`` of the
    tuple it returns, when given), when they all agree; ``None`` when one may give
    something else (a flag choosing between scores and probabilities) or is unknown."""
    returns = [
        r for r in sorted(returns_of(function.node), key=lambda r: r.lineno) if r.value is not None
    ]
    values: list[ast.expr] = []
    for ret in returns:
        value = ret.value
        if index is not None:
            if not (
                isinstance(value, (ast.Tuple, ast.List))
                and index < len(value.elts)
                and not any(isinstance(e, ast.Starred) for e in value.elts)
            ):
                return None
            value = value.elts[index]
        if value is not None:
            values.append(value)
    origins = [origin_of(ctx, value, function, depth + 1) for value in values]
    if not origins or any(o is None for o in origins):
        return None
    kinds = {o.activation for o in origins if o is not None}
    if len(kinds) != 1:
        return None
    where = f"of {label} (line {returns[-1].lineno}"
    where += ")" if index is None else f", item {index} of the tuple it returns)"
    return Origin(kinds.pop(), function.node, None, where)
