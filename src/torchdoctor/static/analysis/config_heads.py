"""Models whose last layer a configuration decides, and losses a configuration picks.

A project builds its model with a factory (``build_scorer(cfg["model"])``, often in
another module) that appends ``nn.Sigmoid()`` when the config asks for probabilities,
and picks its loss by name from the same config (``LOSSES[cfg["loss"]]``). Whether the
sigmoid reaches a with-logits loss is then decided by literal values the file holds, and
this module follows them:

* :func:`resolved` follows a value through assignments that surely ran, tuples returned
  by functions of the file (their parameters bound to the call's arguments), constant
  keys of dict literals (``d[k]``, ``d.get(k)``) and conditional expressions whose test
  it can decide; :func:`picked_loss` uses it to tell which loss a callable is.
* :func:`configured_head` reads the factory a model comes from (a function of this file,
  of another linted file, or of a module beside the script that it imports: Python finds
  those on the script's own folder) and tells what the ``nn.Sequential`` it returns ends
  in, for the argument values of that one call.

A dict the file changes anywhere (``cfg["x"] = ...``, ``cfg.update(...)``), a branch on a
value it cannot read, or a layer list handed to other code leaves the answer unknown.
"""

from __future__ import annotations

import ast
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from torchdoctor.static import torchapi
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import conditional
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.files import read_source
from torchdoctor.static.names import returns_of
from torchdoctor.static.project_facts import summarise
from torchdoctor.static.structure import FunctionScope
from torchdoctor.static.torchapi import LOSS_CLASSES, LOSS_FUNCTIONS, LossKind

__all__ = ["Head", "configured_head", "picked_loss", "resolved"]

_MAX_STEPS = 12
_UNKNOWN = object()
# What a model call may be wrapped in and still be the same module.
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train"})
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "append"})
_COMPARE: dict[type[ast.cmpop], Callable[[object, object], object]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: operator.contains(b, a),  # type: ignore[arg-type]
    ast.NotIn: lambda a, b: not operator.contains(b, a),  # type: ignore[arg-type]
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


@dataclass(frozen=True, slots=True)
class Value:
    """An expression, the scope it is read in, and what the function's parameters hold
    there (the arguments of the call being followed)."""

    expr: ast.expr
    scope: Scope
    env: Mapping[str, Value]


@dataclass(frozen=True, slots=True)
class Head:
    """The last layer a factory gives the model for one call."""

    factory: str  # the factory's name
    path: str  # the file that defines it
    layer: ast.expr  # the last layer, e.g. ``nn.Sigmoid()``
    switch: str | None  # the ``if`` test that put it there, when one did


def resolved(ctx: FileContext, value: Value) -> Value:
    """``value`` followed as far as the file proves what it holds."""
    for _ in range(_MAX_STEPS):
        following = _step(ctx, value)
        if following is None:
            break
        value = following
    return value


def picked_loss(ctx: FileContext, func: ast.expr, scope: Scope) -> LossKind | None:
    """The loss a callable the file calls is (``loss_fn`` picked from a config), when
    the file proves it: a loss function, or a loss module it constructs."""
    if isinstance(func, ast.Name) and func.id not in _assigned(ctx):
        return None  # a function, an import, a parameter: nothing a config picked
    found = resolved(ctx, Value(func, scope, {}))
    expr = found.expr
    if isinstance(expr, (ast.Name, ast.Attribute)):
        return LOSS_FUNCTIONS.get(ctx.qualified_name(expr, found.scope) or "")
    if isinstance(expr, ast.Call):
        return LOSS_CLASSES.get(ctx.qualified_name(expr.func, found.scope) or "")
    return None


def configured_head(ctx: FileContext, output: ast.expr, scope: Scope) -> Head | None:
    """The last layer of the model whose output ``output`` is (``model(x)``, or a name
    bound to it), when the model comes from a factory call whose ``nn.Sequential`` the
    argument values of that call decide."""
    found = _unwrapped(
        ctx, resolved(ctx, Value(output, scope, {})), torchapi.MEANING_KEEPING_METHODS
    )
    if not isinstance(found.expr, ast.Call):
        return None
    module = Value(found.expr.func, found.scope, found.env)
    made = _unwrapped(ctx, resolved(ctx, module), _SAME_MODULE)
    if not isinstance(made.expr, ast.Call):
        return None
    factory = _factory(ctx, made.expr, made.scope)
    if factory is None:
        return None
    node, qualify, path = factory
    values = _arguments(ctx, made, node)
    if values is None:
        return None
    last = _last_layer(node, qualify, values)
    if last is None:
        return None
    layer, switch = last
    return Head(node.name, path, layer, switch)


# --- following values in this file ---------------------------------------------------------


def _step(ctx: FileContext, value: Value) -> Value | None:
    expr, scope, env = value.expr, value.scope, value.env
    if isinstance(expr, ast.Name):
        if expr.id in env:
            following: Value | None = env[expr.id]
        else:
            following = _binding(ctx, expr, scope, env)
        if following is None or expr.id in _mutated(ctx):
            return None
        return following
    if isinstance(expr, ast.Subscript):
        key = _py_value(expr.slice, _leaf(ctx, value))
        return _item(ctx, Value(expr.value, scope, env), key, None)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "get" and 1 <= len(expr.args) <= 2 and not expr.keywords:
            key = _py_value(expr.args[0], _leaf(ctx, value))
            default = expr.args[1] if len(expr.args) == 2 else ast.Constant(None)
            return _item(ctx, Value(expr.func.value, scope, env), key, default)
        return None
    if isinstance(expr, ast.IfExp):
        test = _py_value(expr.test, _leaf(ctx, value))
        if test is _UNKNOWN:
            return None
        return Value(expr.body if test else expr.orelse, scope, env)
    return None


def _binding(
    ctx: FileContext, name: ast.Name, scope: Scope, env: Mapping[str, Value]
) -> Value | None:
    found = ctx.lookup(name, scope)
    if found is None:
        return None
    binding, owner = found
    if conditional(ctx, binding.node, name, owner):
        return None
    kept = env if owner is scope else {}
    if binding.kind is BindingKind.ASSIGN and binding.value is not None:
        return Value(binding.value, owner, kept)
    if binding.kind is BindingKind.UNPACKED:
        return _unpacked(ctx, name, binding.node, binding.value, owner, kept)
    return None


def _unpacked(
    ctx: FileContext,
    name: ast.Name,
    statement: ast.AST,
    call: ast.expr | None,
    owner: Scope,
    env: Mapping[str, Value],
) -> Value | None:
    """``model, loss_fn = build(CONFIG)``: item ``i`` of the one tuple ``build`` returns,
    with ``build``'s parameters bound to the call's arguments."""
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], (ast.Tuple, ast.List))
        and isinstance(call, ast.Call)
    ):
        return None
    targets = statement.targets[0].elts
    positions = [i for i, t in enumerate(targets) if isinstance(t, ast.Name) and t.id == name.id]
    if len(positions) != 1 or any(isinstance(t, ast.Starred) for t in targets):
        return None
    function = ctx.resolve_local_call(call, owner)
    if function is None:
        return None
    returns = returns_of(function.node)
    if len(returns) != 1 or returns[0] is not function.node.body[-1]:
        return None
    returned = returns[0].value
    if not (
        isinstance(returned, (ast.Tuple, ast.List))
        and len(returned.elts) == len(targets)
        and not any(isinstance(e, ast.Starred) for e in returned.elts)
    ):
        return None
    bound = _call_env(ctx, call, owner, env, function)
    if bound is None:
        return None
    return Value(returned.elts[positions[0]], function, bound)


def _call_env(
    ctx: FileContext,
    call: ast.Call,
    scope: Scope,
    env: Mapping[str, Value],
    function: FunctionScope,
) -> dict[str, Value] | None:
    """The callee's parameters bound to what ``call`` passes (or their defaults)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    names = function.positional_names(call)
    bound = {n: Value(a, scope, env) for n, a in zip(names, call.args, strict=False)}
    bound.update((k.arg, Value(k.value, scope, env)) for k in call.keywords if k.arg)
    args = function.node.args
    for parameter, default in zip(reversed(args.args), reversed(args.defaults), strict=False):
        bound.setdefault(parameter.arg, Value(default, function, {}))
    return bound


def _item(
    ctx: FileContext, container: Value, key: object, default: ast.expr | None
) -> Value | None:
    """Item ``key`` of a dict literal (``default`` when a ``.get`` misses)."""
    if key is _UNKNOWN:
        return None
    found = resolved(ctx, container)
    literal = found.expr
    if not isinstance(literal, ast.Dict) or any(k is None for k in literal.keys):
        return None
    keys = [k.value if isinstance(k, ast.Constant) else _UNKNOWN for k in literal.keys]
    if _UNKNOWN in keys:
        return None
    for index in range(len(keys) - 1, -1, -1):  # the last of a repeated key wins
        if keys[index] == key:
            return Value(literal.values[index], found.scope, found.env)
    return None if default is None else Value(default, container.scope, container.env)


def _leaf(ctx: FileContext, value: Value) -> Callable[[ast.expr], object]:
    """How :func:`_py_value` reads a name or a lookup in this file: as the literal it
    resolves to."""

    def read(expr: ast.expr) -> object:
        return _literal(ctx, resolved(ctx, Value(expr, value.scope, value.env)), 0)

    return read


def _literal(ctx: FileContext, value: Value, depth: int) -> object:
    """The Python value of a literal (nested dicts, lists, tuples of constants)."""
    expr = value.expr
    if isinstance(expr, ast.Constant):
        return expr.value
    if depth > 4:
        return _UNKNOWN
    if isinstance(expr, ast.Dict):
        if any(not isinstance(k, ast.Constant) for k in expr.keys):
            return _UNKNOWN
        return {
            cast("ast.Constant", k).value: _literal(
                ctx, resolved(ctx, Value(v, value.scope, value.env)), depth + 1
            )
            for k, v in zip(expr.keys, expr.values, strict=True)
        }
    if isinstance(expr, (ast.List, ast.Tuple)):
        items = [
            _literal(ctx, resolved(ctx, Value(e, value.scope, value.env)), depth + 1)
            for e in expr.elts
        ]
        return _UNKNOWN if any(isinstance(e, ast.Starred) for e in expr.elts) else items
    return _UNKNOWN


def _unwrapped(ctx: FileContext, value: Value, methods: frozenset[str]) -> Value:
    """``x.squeeze(-1)``, ``model.to(device)``: the value the method is called on."""
    for _ in range(4):
        expr = value.expr
        if not (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in methods
        ):
            break
        value = resolved(ctx, Value(expr.func.value, value.scope, value.env))
    return value


def _mutated(ctx: FileContext) -> frozenset[str]:
    """Names whose value the file changes in place or rebinds from a function
    (``cfg["x"] = ...``, ``cfg.update(...)``, ``global cfg``), read from the recorded
    calls and assignments once per file."""
    key = ("config-heads", "mutated")
    cached = ctx.memo.get(key)
    if cached is None:
        names: set[str] = set()
        for _, items in ctx.module.bodies():
            for item in items:
                _add_changed(item.node, names)
        for function in ctx.module.functions:
            for statement in function.node.body:
                if isinstance(statement, (ast.Global, ast.Nonlocal)):
                    names.update(statement.names)
        cached = ctx.memo[key] = frozenset(names)
    return cast("frozenset[str]", cached)


def _assigned(ctx: FileContext) -> frozenset[str]:
    """Names the file binds by assignment or unpacking, once per file."""
    key = ("config-heads", "assigned")
    cached = ctx.memo.get(key)
    if cached is None:
        names: set[str] = set()
        for _, items in ctx.module.bodies():
            for item in items:
                if isinstance(item.node, ast.Assign):
                    for target in item.node.targets:
                        names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        cached = ctx.memo[key] = frozenset(names)
    return cast("frozenset[str]", cached)


def _changed_in(function: ast.AST) -> set[str]:
    """:func:`_mutated` for one function of another file, by walking it."""
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign)):
            _add_changed(node, names)
    return names


def _add_changed(node: ast.AST, names: set[str]) -> None:
    """The root names ``node`` changes in place: ``d[k] = v``, ``d.x += 1``, ``d.update()``."""
    roots: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        targets = []
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, (ast.Subscript, ast.Attribute)) and isinstance(part.ctx, ast.Store):
                roots.append(part.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _MUTATORS
    ):
        roots.append(node.func.value)
    for root in roots:
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if isinstance(root, ast.Name):
            names.add(root.id)


# --- reading a factory ---------------------------------------------------------------------

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_Factory = tuple[_Function, Callable[[ast.expr], str | None], str]


def _factory(ctx: FileContext, call: ast.Call, scope: Scope) -> _Factory | None:
    """The function a call runs, with how to qualify names in its file: a function of
    this file, or a module-level function of another file."""
    local = ctx.resolve_local_call(call, scope)
    if local is not None:
        if local.owner is not None or local.parent is not None:
            return None
        return local.node, lambda e: ctx.qualified_name(e, local), ctx.path
    qualified = ctx.qualified_name(call.func, scope)
    if qualified is None or qualified.startswith("torch."):
        return None
    module, _, name = qualified.rpartition(".")
    info = ctx.project.function(qualified, near=ctx.path)
    path = info.path if info is not None else _beside(ctx.path, module)
    if path is None:
        return None
    parsed = ctx.project.remember(f"config-heads:{os.path.abspath(path)}", lambda: _read(path))
    if parsed is None:
        return None
    tree, imports = parsed
    node = next(
        (
            s
            for s in tree.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name
        ),
        None,
    )
    if node is None:
        return None
    return node, lambda e: _qualify(e, imports), path


def _beside(path: str, module: str) -> str | None:
    """The file an absolute import names in the script's own folder (Python puts that
    folder first on its search path when it runs the script)."""
    if not module or module.startswith("."):
        return None
    candidate = os.path.join(os.path.dirname(os.path.abspath(path)), *module.split(".")) + ".py"
    return candidate if os.path.isfile(candidate) else None


def _read(path: str) -> tuple[ast.Module, dict[str, str]] | None:
    data = read_source(path)
    if not isinstance(data, bytes):
        return None
    try:
        tree = ast.parse(data, path)
    except (SyntaxError, ValueError):
        return None
    return tree, summarise(path, tree).imports


def _qualify(expr: ast.expr, imports: Mapping[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name) or expr.id not in imports:
        return None
    return torchapi.canonical(".".join([imports[expr.id], *reversed(parts)]))


def _arguments(ctx: FileContext, made: Value, node: _Function) -> dict[str, object] | None:
    """The factory's parameters as the literal values this call gives them."""
    call = made.expr
    assert isinstance(call, ast.Call)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    args = node.args
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    read = _leaf(ctx, made)
    values: dict[str, object] = dict.fromkeys([*names, *(a.arg for a in args.kwonlyargs)], _UNKNOWN)
    for parameter, default in zip(reversed(names), reversed(args.defaults), strict=False):
        values[parameter] = _py_value(default, lambda e: _UNKNOWN)
    for parameter, argument in zip(names, call.args, strict=False):
        values[parameter] = read(argument)
    for keyword in call.keywords:
        if keyword.arg in values:
            values[keyword.arg] = read(keyword.value)
    return values


def _last_layer(
    node: _Function, qualify: Callable[[ast.expr], str | None], values: dict[str, object]
) -> tuple[ast.expr, str | None] | None:
    """The last layer of the ``nn.Sequential`` the factory's one ``return`` builds, and
    the ``if`` test that chose it; ``None`` when it cannot be told."""
    returns = returns_of(node)
    if len(returns) != 1 or returns[0] is not node.body[-1]:
        return None
    built = returns[0].value
    if not (
        isinstance(built, ast.Call)
        and qualify(built.func) == "torch.nn.Sequential"
        and built.args
        and not built.keywords
    ):
        return None
    assigned = {
        n.id
        for s in node.body
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    if (assigned | _changed_in(node)) & set(values):
        return None  # a parameter rebound or changed: its value is no longer the call's
    first = built.args[0]
    if (
        len(built.args) == 1
        and isinstance(first, ast.Starred)
        and isinstance(first.value, ast.Name)
    ):
        tracked = _Layers(first.value.id, values)
        tracked.run(node.body[:-1], None)
        last, switch = tracked.last, tracked.switch
    elif not any(isinstance(a, ast.Starred) for a in built.args):
        last, switch = built.args[-1], None
    else:
        return None
    if (
        not isinstance(last, ast.Call)
        or torchapi.ACTIVATION_LAYERS.get(qualify(last.func) or "") != "sigmoid"
    ):
        return None
    return last, switch


class _Layers:
    """The last item of a list of layers, statement by statement."""

    def __init__(self, name: str, values: dict[str, object]) -> None:
        self.name = name
        self.values = values
        self.last: ast.expr | None = None  # None: empty or unknown
        self.switch: str | None = None

    def run(self, statements: list[ast.stmt], switch: str | None) -> None:
        # an unknown last item stays unknown until a statement sets it for sure
        for statement in statements:
            self._statement(statement, switch)

    def _named(self, expr: ast.expr) -> bool:
        return isinstance(expr, ast.Name) and expr.id == self.name

    def _set(self, last: ast.expr | None, switch: str | None) -> None:
        self.last, self.switch = last, switch

    def _statement(self, statement: ast.stmt, switch: str | None) -> None:
        if not any(self._named(n) for n in ast.walk(statement) if isinstance(n, ast.Name)):
            return
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and self._named(statement.targets[0])
        ):
            self._set(self._tail(statement.value), switch)
        elif isinstance(statement, ast.AugAssign) and self._named(statement.target):
            tail = self._tail(statement.value) if isinstance(statement.op, ast.Add) else None
            if tail is not None or not _empty(statement.value):
                self._set(tail, switch)
        elif (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute)
            and self._named(statement.value.func.value)
            and statement.value.func.attr in ("append", "extend")
            and len(statement.value.args) == 1
            and not statement.value.keywords
        ):
            argument = statement.value.args[0]
            if statement.value.func.attr == "append":
                self._set(argument, switch)
            elif not _empty(argument):
                self._set(self._tail(argument), switch)
        elif isinstance(statement, ast.If) and not any(
            self._named(n) for n in ast.walk(statement.test) if isinstance(n, ast.Name)
        ):
            test = _py_value(statement.test, self._read)
            if test is _UNKNOWN:
                self._set(None, switch)
            elif test:
                self.run(statement.body, ast.unparse(statement.test))
            else:
                self.run(statement.orelse, switch)
        else:
            self._set(None, switch)  # a loop, an insert, the list handed on: unknown

    def _read(self, expr: ast.expr) -> object:
        return self.values.get(expr.id, _UNKNOWN) if isinstance(expr, ast.Name) else _UNKNOWN

    @staticmethod
    def _tail(value: ast.expr) -> ast.expr | None:
        if (
            isinstance(value, (ast.List, ast.Tuple))
            and value.elts
            and not isinstance(value.elts[-1], ast.Starred)
        ):
            return value.elts[-1]
        return None


def _empty(value: ast.expr) -> bool:
    return isinstance(value, (ast.List, ast.Tuple)) and not value.elts


# --- deciding a test -----------------------------------------------------------------------


def _py_value(expr: ast.expr, leaf: Callable[[ast.expr], object]) -> object:
    """The value of a test or key built from literals and what ``leaf`` reads (names,
    lookups), or ``_UNKNOWN``."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.BoolOp):
        parts = [_py_value(v, leaf) for v in expr.values]
        if _UNKNOWN in parts:
            return _UNKNOWN
        return all(parts) if isinstance(expr.op, ast.And) else any(parts)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _py_value(expr.operand, leaf)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        compare = _COMPARE.get(type(expr.ops[0]))
        left, right = _py_value(expr.left, leaf), _py_value(expr.comparators[0], leaf)
        if compare is None or _UNKNOWN in (left, right):
            return _UNKNOWN
        if isinstance(expr.ops[0], (ast.Is, ast.IsNot)) and not all(
            v is None or isinstance(v, bool) for v in (left, right)
        ):
            return _UNKNOWN
        try:
            return bool(compare(left, right))
        except TypeError:
            return _UNKNOWN
    if isinstance(expr, ast.Subscript):
        base = _py_value(expr.value, leaf)
        key = _py_value(expr.slice, leaf)
        if isinstance(base, dict) and key is not _UNKNOWN and key in base:
            return base[key]
        return _UNKNOWN
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "get"
        and 1 <= len(expr.args) <= 2
        and not expr.keywords
    ):
        base = _py_value(expr.func.value, leaf)
        key = _py_value(expr.args[0], leaf)
        if not isinstance(base, dict) or key is _UNKNOWN:
            return _UNKNOWN
        if key in base:
            return base[key]
        return _py_value(expr.args[1], leaf) if len(expr.args) == 2 else None
    return leaf(expr)
