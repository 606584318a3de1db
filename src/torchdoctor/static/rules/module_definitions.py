"""Mistakes in how an ``nn.Module`` is defined or frozen, visible in its own source.

TD221 requires-grad-set-on-module (``module.requires_grad = False`` sets a plain
attribute), TD223 layers-in-plain-container (layers in a ``list``/``dict``/``tuple``
attribute are never registered), TD506 functional-dropout-ignores-training (``F.dropout``
in a module without ``training=self.training`` stays on in eval mode).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import cast

from torchdoctor.findings import Applicability, Confidence, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import class_constructions, constant_arguments
from torchdoctor.static.analysis.calls import (
    insert_keywords,
    keyword,
    last_name,
    requires_grad_setting,
    root_name,
)
from torchdoctor.static.analysis.loops import element_pairs
from torchdoctor.static.analysis.related_files import (
    first_in_imported_files,
    first_in_related_files,
)
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.branches import compared, isinstance_failed, spans
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ClassScope, Frame, FrameKind, FunctionScope
from torchdoctor.static.training import train_flag

__all__ = ["is_module_class", "nn_alias"]

_CHILD_ITERATORS = frozenset({"children", "modules"})
_NAMED_CHILD_ITERATORS = frozenset({"named_children", "named_modules"})
_REGISTERING = frozenset({"add_module", "register_module", "setattr"})
_DROPOUTS = frozenset(
    {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
)


def is_module_class(ctx: FileContext, cls: ClassScope) -> bool:
    """Whether a class of the file derives (through the file's classes) from ``nn.Module``."""
    return ctx.is_family(f"<local>.{cls.name}", torchapi.MODULE)


def nn_alias(ctx: FileContext) -> str | None:
    """How the file spells ``torch.nn`` (``nn``, ``torch.nn``), if it imports either."""
    for local, target in ctx.imports.items():
        if target == "torch.nn":
            return local
    for local, target in ctx.imports.items():
        if target == "torch":
            return f"{local}.nn"
    return None


def _module_evidence(ctx: FileContext, expr: ast.expr, scope: Scope) -> Confidence | None:
    """How sure the file makes us that ``expr`` is an ``nn.Module`` (``None``: not sure)."""
    if _drawn_from_parameters(ctx, expr, scope):
        return None  # `for p_s, p_t in zip(s.parameters(), teacher.parameters())`
    found = ctx.family_of(expr, scope)
    if found is not None:
        if found[0] != torchapi.MODULE:
            return None
        if (
            found[1] is not Confidence.HIGH
            and isinstance(expr, ast.Attribute)
            and _built_as_a_parameter(ctx, expr.attr)
        ):
            return None  # only the name says module; a class of the project says Parameter
        return found[1]
    if isinstance(expr, ast.Attribute) and _layer_of_a_model(ctx, expr, scope):
        return Confidence.HIGH
    type_name = ctx.instance_type(expr, scope)
    if type_name is not None and not type_name.startswith(("<local>.", "torch.")):
        # a class of another linted file ("models.net.Net" may be indexed as "net.Net")
        info = ctx.project_class_named(type_name) or ctx.project_class_named(
            type_name.rpartition(".")[2]
        )
        return Confidence.HIGH if info is not None and info.is_module else None
    loop = _loop_binding(ctx, expr, scope)
    if loop is None or not isinstance(expr, ast.Name) or not isinstance(loop.iter, ast.Call):
        return None
    func = loop.iter.func
    if not isinstance(func, ast.Attribute):
        return None
    target = loop.target
    if func.attr in _CHILD_ITERATORS and isinstance(target, ast.Name):
        return Confidence.HIGH
    if (
        func.attr in _NAMED_CHILD_ITERATORS
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[1], ast.Name)
        and target.elts[1].id == expr.id
    ):
        return Confidence.HIGH
    return None


def _built_as_a_parameter(ctx: FileContext, attr: str) -> bool:
    """Some class of this file, of a file along its folder line or of a project module it
    imports builds ``self.<attr> = nn.Parameter(...)`` (PENet's ``encoder3`` buffers,
    whose module ``main.py`` reaches through star imports): read as text, since such
    imports hide the class from the project index."""
    pattern = re.compile(
        rb"self\." + re.escape(attr.encode()) + rb"\s*=\s*(?:[\w.]+\.)?Parameter\s*\("
    )

    def found_in(path: str, data: bytes) -> tuple[str, int] | None:
        return (path, 0) if pattern.search(data) else None

    key = ("TD221", "parameter", attr)
    if key not in ctx.memo:
        own = found_in(ctx.path, ctx.source.encode("utf-8", "replace"))
        ctx.memo[key] = bool(
            own
            or first_in_related_files(ctx, f"parameter-attribute:{attr}", found_in)
            or first_in_imported_files(ctx, found_in)
        )
    return bool(ctx.memo[key])


def _drawn_from_parameters(ctx: FileContext, expr: ast.expr, scope: Scope) -> bool:
    """``expr`` is a loop name bound to the elements of ``.parameters()`` (or the values
    of ``.named_parameters()``), directly or through ``zip``/``enumerate``: a parameter,
    whatever its name says (MMSelfSup's ``param_teacher``)."""
    loop = _loop_binding(ctx, expr, scope)
    if loop is None or not isinstance(expr, ast.Name):
        return False
    return _source_of(loop.target, loop.iter, expr.id) in ("parameters", "named_parameters")


def _loop_binding(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.For | ast.AsyncFor | None:
    """The ``for`` loop whose target binds the name ``expr``, if that is how it is bound."""
    if not isinstance(expr, ast.Name):
        return None
    binding = ctx.lookup(expr, scope)
    if binding is None or binding[0].kind is not BindingKind.LOOP_TARGET:
        return None
    loop = binding[0].node
    return loop if isinstance(loop, (ast.For, ast.AsyncFor)) else None


def _source_of(target: ast.expr, iterable: ast.expr, name: str) -> str | None:
    """The method whose results bind ``name`` in ``for <target> in <iterable>``: through
    ``zip`` and ``enumerate`` unpacked in place; the value of a ``named_*`` pair."""
    for source, element in element_pairs(target, iterable) or [(iterable, target)]:
        if not (isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute)):
            continue
        method = source.func.attr
        if isinstance(element, ast.Name) and element.id == name:
            return method
        if (
            method.startswith("named_")
            and isinstance(element, (ast.Tuple, ast.List))
            and len(element.elts) == 2
            and isinstance(element.elts[1], ast.Name)
            and element.elts[1].id == name
        ):
            return method
    return None


def _layer_of_a_model(ctx: FileContext, expr: ast.Attribute, scope: Scope) -> bool:
    """``model.head`` where ``model`` is an instance of a project class whose ``__init__``
    builds ``self.head`` from a module class (``nn.Linear``, a model class of the project)."""
    owner = ctx.instance_type(expr.value, scope)
    info = ctx.project_class_named(owner) if owner is not None else None
    built = info.attributes.get(expr.attr) if info is not None else None
    if built is None:
        return False
    if built.startswith("torch."):
        return torchapi.in_family(built, torchapi.MODULE)
    layer = ctx.project_class_named(built)
    return bool(layer is not None and layer.is_module)


def _defines_requires_grad(ctx: FileContext, expr: ast.expr, scope: Scope) -> bool:
    """Whether the value's class (of this file) defines its own ``requires_grad``."""
    type_name = ctx.instance_type(expr, scope)
    if type_name is None or not type_name.startswith("<local>."):
        return False
    cls = ctx.local_class(type_name[len("<local>.") :])
    if cls is None:
        return False
    if "requires_grad" in cls.methods:
        return True
    for statement in cls.node.body:
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else ([statement.target] if isinstance(statement, ast.AnnAssign) else [])
        )
        if any(isinstance(t, ast.Name) and t.id == "requires_grad" for t in targets):
            return True
    init = cls.methods.get("__init__")
    return init is not None and any(
        isinstance(i.node, ast.Assign)
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == "requires_grad"
            and isinstance(t.value, ast.Name)
            and t.value.id == init.self_name
            for t in i.node.targets
        )
        for i in init.items
    )


@detector("TD221", depth=Depth.LINT)
class RequiresGradSetOnModule(LintRule):
    """``module.requires_grad = False``: a new attribute on the module, no parameter frozen."""

    requires = ("requires_grad",)
    # judged once the file is walked: a helper's parameter (`def set_trainable(module,
    # flag): module.requires_grad = flag`) is typed by what its callers pass
    needs_structure = True

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._assignments: list[
            tuple[ast.Assign, ast.Attribute, FunctionScope | None, tuple[Frame, ...]]
        ] = []

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0]
        if not isinstance(target, ast.Attribute) or target.attr != "requires_grad":
            return
        value = node.value
        if isinstance(value, ast.Name) or (
            isinstance(value, ast.Constant) and isinstance(value.value, bool)
        ):
            self._assignments.append((node, target, self.ctx.function, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        for node, target, scope, frames in self._assignments:
            self._check(node, target, scope, frames)

    def _check(
        self,
        node: ast.Assign,
        target: ast.Attribute,
        scope: FunctionScope | None,
        frames: tuple[Frame, ...],
    ) -> None:
        ctx = self.ctx
        confidence = _module_evidence(ctx, target.value, scope)
        if confidence is None or _defines_requires_grad(ctx, target.value, scope):
            return
        if isinstance_failed(ctx, frames, target.value, torchapi.MODULE, scope):
            return  # `else: x.requires_grad = flag` after `if isinstance(x, nn.Module):`
        name = ctx.segment(target.value)
        flag = ctx.segment(node.value)
        effect = {
            "False": "nothing is frozen: backward still computes their gradients, and an "
            "optimizer holding them still updates them",
            "True": "nothing is unfrozen: the frozen ones still get no gradient and are "
            "never trained",
        }.get(flag) or "no parameter's flag changes"
        replacement = f"{name}.requires_grad_({flag})"
        self.report(
            node,
            f"`{name}` is a module: `{name}.requires_grad = {flag}` at line {node.lineno} "
            f"only sets a new attribute on it; every parameter keeps its own flag, so "
            f"{effect}",
            fix_hint=f"Call `{replacement}`, which sets the flag of every parameter.",
            confidence=confidence,
            fix=Fix(
                f"Call `{replacement}`", (ctx.replace(node, replacement),), Applicability.UNSAFE
            ),
        )


@detector("TD223", depth=Depth.LINT)
class LayersInPlainContainer(LintRule):
    """Layers kept in a plain ``list``/``dict``/``tuple`` attribute of an ``nn.Module``."""

    needs_structure = True

    def leave_class(self, cls: ClassScope) -> None:
        ctx = self.ctx
        if not cls.methods or not is_module_class(ctx, cls):
            return
        calls = [
            (m, i.node)
            for m in cls.methods.values()
            for i in m.items
            if isinstance(i.node, ast.Call)
        ]
        if any(last_name(call.func) in _REGISTERING for _, call in calls):
            return
        for method in cls.methods.values():
            for item in method.items:
                node = item.node
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    self._check(cls, method, node, node.targets[0], calls)

    def _check(
        self,
        cls: ClassScope,
        method: FunctionScope,
        node: ast.Assign,
        target: ast.expr,
        calls: list[tuple[FunctionScope, ast.Call]],
    ) -> None:
        ctx = self.ctx
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == method.self_name
        ):
            return
        value = node.value
        elements = _elements(value)
        if elements is None:
            return
        if not elements:  # self.layers = [] then self.layers.append(Linear(...))
            elements = _added_later(target.attr, calls) + _stored_later(cls, target.attr)
        layers = [e for e in elements if _holds_parameters(ctx, e[1], e[0] or method)]
        if (
            not layers
            or _passed_on(target.attr, calls)
            or _registered_on_use(cls, target.attr)
            or _parameters_registered(cls, target.attr)
        ):
            return
        kind = (
            "dict"
            if isinstance(value, (ast.Dict, ast.DictComp))
            else ("tuple" if isinstance(value, ast.Tuple) else "list")
        )
        container = "ModuleDict" if kind == "dict" else "ModuleList"
        first = ctx.segment(layers[0][1])
        example = f" such as `{first}`" if len(first) <= 40 and "\n" not in first else ""
        message = (
            f"`self.{target.attr}` of `{cls.name}` (line {node.lineno}) is a plain {kind} "
            f"holding modules{example}: PyTorch does not register them, so their "
            "parameters are missing from `parameters()` (never trained), from "
            "`state_dict()` (never saved) and from `.to(device)`"
        )
        frozen = _frozen_in_class(cls, target.attr)
        if frozen:
            # A frozen module kept out of parameters() and state_dict() is a known way to
            # hide a fixed filter or a perceptual network: only `.to()` is still missed.
            message += (
                "; the class freezes them (`requires_grad_(False)`), so hiding them from "
                "training and checkpoints looks intended: only `.to(device)` and `.half()` "
                "pass them by"
            )
        self.report(
            node,
            message,
            severity=Severity.INFO if frozen else None,
            fix_hint=f"Wrap it: `self.{target.attr} = nn.{container}(...)`.",
            fix=self._fix(value, container),
        )

    def _fix(self, value: ast.expr, container: str) -> Fix | None:
        alias = nn_alias(self.ctx)
        if alias is None:
            return None
        if isinstance(value, ast.Dict) and not value.keys:
            return None  # filled later: its keys may not be strings, which ModuleDict needs
        if isinstance(value, ast.Dict) and not all(
            isinstance(k, (ast.Constant, ast.JoinedStr))
            and (not isinstance(k, ast.Constant) or isinstance(k.value, str))
            for k in value.keys
        ):
            return None
        if isinstance(value, ast.DictComp):
            return None
        text = f"{alias}.{container}({self.ctx.segment(value)})"
        return Fix(
            f"Use `{alias}.{container}`", (self.ctx.replace(value, text),), Applicability.UNSAFE
        )


Element = tuple[FunctionScope | None, ast.expr]


def _elements(value: ast.expr) -> list[Element] | None:
    if isinstance(value, (ast.List, ast.Tuple)):
        return [(None, e) for e in value.elts if not isinstance(e, ast.Starred)]
    if isinstance(value, ast.Dict):
        return [(None, v) for v in value.values]
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return [(None, value.elt)]
    if isinstance(value, ast.DictComp):
        return [(None, value.value)]
    return None


def _added_later(attr: str, calls: list[tuple[FunctionScope, ast.Call]]) -> list[Element]:
    """Arguments of ``self.<attr>.append(...)`` / ``.extend([...])`` anywhere in the class."""
    found: list[Element] = []
    for method, call in calls:
        func = call.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in ("append", "extend")
            and _is_self_attr(func.value, attr, method)
            and call.args
        ):
            continue
        argument = call.args[0]
        if func.attr == "append":
            found.append((method, argument))
        else:
            found += [(method, e) for _, e in (_elements(argument) or [])]
    return found


def _stored_later(cls: ClassScope, attr: str) -> list[Element]:
    """Values of ``self.<attr>[key] = ...`` anywhere in the class."""
    found: list[Element] = []
    for method in cls.methods.values():
        for item in method.items:
            node = item.node
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Subscript)
                and _is_self_attr(node.targets[0].value, attr, method)
            ):
                found.append((method, node.value))
    return found


def _is_self_attr(expr: ast.expr, attr: str, method: FunctionScope) -> bool:
    return (
        isinstance(expr, ast.Attribute)
        and expr.attr == attr
        and isinstance(expr.value, ast.Name)
        and expr.value.id == method.self_name
    )


def _passed_on(attr: str, calls: list[tuple[FunctionScope, ast.Call]]) -> bool:
    """Whether ``self.<attr>`` is handed to a call (``nn.Sequential(*self.layers)``), or
    its modules are (``nn.ModuleList([m for m in self.layers])``). Iterating it is not
    handing it on: a builtin that only reads its items (``enumerate(self.layers)``,
    ``zip(self.heads, xs)``) or a comprehension that calls each module
    (``sum(loss(x) for loss in self.losses.values())``) leaves them unregistered."""
    for method, call in calls:
        reader = isinstance(call.func, ast.Name) and call.func.id in _ITERATING_BUILTINS
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            if reader and _the_container(argument, attr, method):
                continue
            if _hands_over(argument, attr, method):
                return True
    return False


# Builtins that only iterate or measure a container (each call is judged on its own; the
# consuming ones return no module, so what they are handed goes nowhere either).
_CONSUMING_BUILTINS = frozenset({"len", "sum", "max", "min", "any", "all"})
_ITERATING_BUILTINS = _CONSUMING_BUILTINS | {"enumerate", "zip", "reversed", "sorted", "iter"}
_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)
_VIEWS = frozenset({"values", "items", "keys"})


def _hands_over(expr: ast.expr, attr: str, method: FunctionScope) -> bool:
    """Whether the argument ``expr`` carries ``self.<attr>`` or its modules to the callee:
    itself or a view of it, inside a call's arguments (``sorted(self.layers)``), or a
    comprehension over it that does more than call each module."""
    if _the_container(expr, attr, method):
        return True
    if isinstance(expr, _COMPREHENSIONS):
        if _only_calls_items(expr, attr, method):
            return False
        return any(_is_self_attr(n, attr, method) for n in ast.walk(expr))  # type: ignore[arg-type]
    if isinstance(expr, ast.Call):
        consuming = isinstance(expr.func, ast.Name) and expr.func.id in _CONSUMING_BUILTINS
        return any(
            not (consuming and _the_container(a, attr, method)) and _hands_over(a, attr, method)
            for a in [*expr.args, *(k.value for k in expr.keywords)]
        )
    if isinstance(expr, ast.Lambda):
        return any(_is_self_attr(n, attr, method) for n in ast.walk(expr))  # type: ignore[arg-type]
    return any(
        _hands_over(child, attr, method)
        for child in ast.iter_child_nodes(expr)
        if isinstance(child, ast.expr)
    )


def _the_container(expr: ast.expr, attr: str, method: FunctionScope) -> bool:
    """``self.<attr>``, or one of its dict views (``self.<attr>.values()``)."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _VIEWS
        and not expr.args
    ):
        expr = expr.func.value
    return _is_self_attr(expr, attr, method)


def _only_calls_items(
    comprehension: ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp,
    attr: str,
    method: FunctionScope,
) -> bool:
    """A comprehension over ``self.<attr>`` (or ``enumerate``/``zip`` of it) that only
    calls the items it draws: ``[head(x) for head in self.heads]``, never hands one on."""
    targets: set[str] = set()
    for generator in comprehension.generators:
        source = generator.iter
        if (
            isinstance(source, ast.Call)
            and isinstance(source.func, ast.Name)
            and source.func.id in _ITERATING_BUILTINS
        ):
            sources = source.args
        else:
            sources = [source]
        if not any(_the_container(s, attr, method) for s in sources):
            return False
        targets |= {n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)}
    parts = (
        [comprehension.key, comprehension.value]
        if isinstance(comprehension, ast.DictComp)
        else [comprehension.elt]
    )
    called = {
        id(node.func)
        for part in parts
        for node in ast.walk(part)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return not any(
        isinstance(node, ast.Name) and node.id in targets and id(node) not in called
        for part in parts
        for node in ast.walk(part)
    )


def _parameters_registered(cls: ClassScope, attr: str) -> bool:
    """Whether a loop over ``self.<attr>`` registers the parameters of each layer it holds
    on the module (TPLinker: ``for i, fc in enumerate(self.fc_list):
    self.register_parameter(f"weight_{i}", fc.weight)``), itself or through a method of
    the class that registers what it is handed (pytorch_RVAE's Highway:
    ``self._add_to_parameters(layer.parameters(), name)``): they are then in
    ``parameters()`` and ``state_dict()``, the same tensors the layers use."""
    registering = _registering_methods(cls)
    for method in cls.methods.values():
        for loop in ast.walk(method.node):
            if not isinstance(loop, ast.For):
                continue
            iterable, target = loop.iter, loop.target
            if (
                isinstance(iterable, ast.Call)
                and isinstance(iterable.func, ast.Name)
                and iterable.func.id == "enumerate"
                and iterable.args
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                iterable, target = iterable.args[0], target.elts[1]
            if not (_is_self_attr(iterable, attr, method) and isinstance(target, ast.Name)):
                continue
            for call in ast.walk(loop):
                if not (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Name)
                    and call.func.value.id == method.self_name
                ):
                    continue
                if call.func.attr == "register_parameter":
                    handed = _registered_value(call)
                elif call.func.attr in registering:
                    handed = [*call.args, *(k.value for k in call.keywords)]
                else:
                    continue
                if any(_called_root(argument) == target.id for argument in handed):
                    return True
    return False


def _registered_value(call: ast.Call) -> list[ast.expr]:
    """The parameter a ``register_parameter(name, param)`` call registers, as a list."""
    given = keyword(call, "param")
    if given is not None:
        return [given.value]
    return call.args[1:2]


def _called_root(expr: ast.expr) -> str | None:
    """The name a chain of attributes, items and method calls starts from: ``layer`` for
    ``layer.weight`` and for ``layer.parameters()``."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        expr = expr.func.value
    return root_name(expr)


def _registering_methods(cls: ClassScope) -> set[str]:
    """The methods of the class that register on ``self`` a parameter drawn from one of
    their own arguments: ``self.register_parameter(name, p)`` where ``p`` is an argument
    or a loop variable over one (``for i, p in enumerate(params): ...``)."""
    found: set[str] = set()
    for name, method in cls.methods.items():
        arguments = {a.arg for a in method.node.args.args[1:] + method.node.args.kwonlyargs}
        if not arguments:
            continue
        drawn = set(arguments)
        for loop in ast.walk(method.node):
            if not isinstance(loop, ast.For):
                continue
            for iterable, part in element_pairs(loop.target, loop.iter) or [
                (loop.iter, loop.target)
            ]:
                if root_name(iterable) in arguments:
                    drawn |= {n.id for n in ast.walk(part) if isinstance(n, ast.Name)}
        for call in ast.walk(method.node):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_parameter"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == method.self_name
                and any(root_name(value) in drawn for value in _registered_value(call))
            ):
                found.add(name)
                break
    return found


def _registered_on_use(cls: ClassScope, attr: str) -> bool:
    """Whether every module taken out of ``self.<attr>`` is stored in a registered
    attribute before use: ``self.backbone = self.models[name]``, directly or through a
    method of the class that returns it (``self.backbone = self._pick(name)``). The
    container is then only a menu; the module in use is registered, and the others are
    never run."""
    returned: set[int] = set()  # uses whose item the method returns
    uses: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]] = []
    for method in cls.methods.values():
        function = method.node
        self_name = method.self_name
        items_in: dict[str, list[int]] = {}  # local name -> uses whose item it holds
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == attr
                and isinstance(node.value, ast.Name)
                and node.value.id == self_name
                and isinstance(node.ctx, ast.Load)
            ):
                uses.append((function, node))
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and _item_of(node.value, attr, self_name)
            ):
                items_in.setdefault(node.targets[0].id, []).append(id(node.value.value))  # type: ignore[attr-defined]
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                if _item_of(node.value, attr, self_name):
                    returned.add(id(node.value.value))  # type: ignore[attr-defined]
                elif isinstance(node.value, ast.Name):
                    returned.update(items_in.get(node.value.id, ()))
    if not uses:
        return False
    stored: set[int] = set()  # the ids of uses whose item ends in a registered attribute
    for method in cls.methods.values():
        self_name = method.self_name
        for node in ast.walk(method.node):
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and isinstance(node.targets[0].value, ast.Name)
                and node.targets[0].value.id == self_name
                and node.targets[0].attr != attr
            ):
                continue
            if _item_of(node.value, attr, self_name):
                stored.add(id(node.value.value))  # type: ignore[attr-defined]
    return all(
        id(use) in stored or (id(use) in returned and _called_into_attribute(cls, function.name))
        for function, use in uses
    )


def _frozen_in_class(cls: ClassScope, attr: str) -> bool:
    """Whether a method freezes what ``self.<attr>`` holds:
    ``self.<attr>[0].requires_grad_(False)`` or ``self.<attr>[0].weight.requires_grad =
    False`` (decaNLP's GloVe table), or the same on the variable of a loop over the
    container."""
    for method in cls.methods.values():
        self_name = method.self_name
        looped: set[str] = set()
        for node in ast.walk(method.node):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                iterated = node.iter
                if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Attribute):
                    iterated = iterated.func.value  # self.layers.values()
                if _rooted_at(iterated, attr, self_name):
                    looped.add(node.target.id)
        for node in ast.walk(method.node):
            setting = requires_grad_setting(node)
            if setting is None or setting[1]:
                continue
            receiver = setting[0]
            while isinstance(receiver, ast.Attribute) and not (
                isinstance(receiver.value, ast.Name) and receiver.value.id == self_name
            ):
                receiver = receiver.value  # `...[0].weight.requires_grad = False`
                while isinstance(receiver, ast.Subscript):
                    receiver = receiver.value
            if _rooted_at(receiver, attr, self_name) or (
                isinstance(receiver, ast.Name) and receiver.id in looped
            ):
                return True
    return False


def _rooted_at(expr: ast.expr, attr: str, self_name: str | None) -> bool:
    """``self.<attr>`` or an item of it (``self.<attr>[0]``)."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return (
        isinstance(expr, ast.Attribute)
        and expr.attr == attr
        and isinstance(expr.value, ast.Name)
        and expr.value.id == self_name
    )


def _item_of(expr: ast.expr, attr: str, self_name: str | None) -> bool:
    """``self.<attr>[key]``: one module taken out of the container."""
    return (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Attribute)
        and expr.value.attr == attr
        and isinstance(expr.value.value, ast.Name)
        and expr.value.value.id == self_name
    )


def _called_into_attribute(cls: ClassScope, name: str) -> bool:
    """Whether every call of ``self.<name>(...)`` in the class is stored in an attribute."""
    calls = stored = 0
    for method in cls.methods.values():
        self_name = method.self_name
        for node in ast.walk(method.node):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == name
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == self_name
            ):
                calls += 1
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == name
                and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == self_name
            ):
                stored += 1
    return calls > 0 and calls == stored


def _holds_parameters(ctx: FileContext, expr: ast.expr, scope: FunctionScope) -> bool:
    """A freshly built layer that (as far as the file shows) has parameters."""
    if not isinstance(expr, ast.Call):
        return False
    type_name = ctx.instance_type(expr, scope)
    if type_name is None or not ctx.is_family(type_name, torchapi.MODULE):
        return False
    if torchapi.holds_no_parameters(type_name) or ctx.is_family(type_name, torchapi.LOSS):
        return False
    # a project class whose __init__ builds only parameter-free layers (a pooling block)
    info = ctx.project_class_named(type_name)
    return info is None or not info.holds_no_parameters


@detector("TD506", depth=Depth.LINT)
class FunctionalDropoutIgnoresTraining(LintRule):
    """``F.dropout(x, p)`` in a module's method, without ``training=self.training``."""

    requires = ("dropout",)
    call_names = _DROPOUTS

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        # where each function of the file calls `self.eval()`/`self.train()`, walked once
        self._switches: dict[int, list[tuple[tuple[int, int], bool]]] = {}

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        method = ctx.function
        if method is None or method.owner is None or method.self_name is None:
            return
        qualified = ctx.qualified_name(node.func)
        if qualified is None or qualified.rpartition(".")[0] != "torch.nn.functional":
            return
        if (
            len(node.args) > 2
            or keyword(node, "training") is not None
            or any(k.arg is None for k in node.keywords)
            or any(isinstance(a, ast.Starred) for a in node.args)
        ):
            return
        if any(
            f.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE)
            and "training" in ctx.segment(f.node.test)
            for f in ctx.frames
            if isinstance(f.node, ast.If)
        ):
            return
        if _under_a_mode_switch(ctx, node):
            return  # IMS-Toucan: `if is_inference: ... else: ...`, a path for each mode
        if self._runs_after_self_eval(method, node):
            return  # IMS-Toucan's InferenceToucanTTS: `self.eval()` ends its __init__
        if _after_an_exit_on_the_mode(ctx, method, node):
            return  # `if self.training: return ...` first: the rest is the eval path
        if _documented_always_on(method):
            return  # Tacotron 2's prenet: "always applies dropout, even in evaluation"
        if not is_module_class(ctx, method.owner) or _rate_follows_mode(ctx, method, node):
            return
        if _rate_zeroed_by_a_caller(ctx, method, node):
            return  # HCCF: `F.dropout(x, p=1 - keep_rate)`, full_predict passes keep_rate=1.0
        if _switched_by_the_caller(ctx, method, node):
            return
        flag = f"training={method.self_name}.training"
        text = ctx.segment(node.func)
        message = (
            f"`{text}(...)` at line {node.lineno} in `{method.owner.name}.{method.name}` "
            "does not pass `training`: functional dropout defaults to `training=True`, so "
            "it keeps dropping activations after `model.eval()` and evaluation is noisy "
            "and worse"
        )
        handed = _rate_handed_in(ctx, method, node)
        if handed:
            # pytorch_RVAE's decoder: `forward(self, x, drop_prob)`, and the evaluating
            # callers pass 0.: whether evaluation drops anything is up to each call.
            message += (
                f", unless every evaluating call passes a rate of 0: the rate comes from "
                f"`{handed}`, a parameter each call must give"
            )
        self.report(
            node,
            message,
            severity=Severity.INFO if handed else None,
            fix_hint=f"Pass `{flag}` (or use an `nn.Dropout` layer, which follows the "
            "module's mode).",
            fix=Fix(f"Pass `{flag}`", (insert_keywords(ctx, node, flag),), Applicability.UNSAFE),
        )

    def _runs_after_self_eval(self, method: FunctionScope, call: ast.Call) -> bool:
        """The module puts itself in eval mode: ``self.eval()`` (or ``self.train(False)``)
        is the last mode switch of its class's ``__init__`` (IMS-Toucan's inference-only
        ``InferenceToucanTTS``, which still applies ``F.dropout`` in its ``_forward``), or
        the last one before the dropout in the method that runs it. The author wrote the
        dropout for a module in eval mode, on purpose. A caller's ``self.eval()`` before
        ``self.forward(x)`` does not count: it is the mistake itself, believing eval mode
        turns functional dropout off."""
        if method.owner is None:
            return False
        position = (call.lineno, call.col_offset)
        before = [
            evaluates for place, evaluates in self._mode_switches(method.node) if place < position
        ]
        if before:
            return before[-1]
        for member in method.owner.node.body:
            if isinstance(member, ast.FunctionDef) and member.name == "__init__":
                switches = self._mode_switches(member)
                return bool(switches) and switches[-1][1]
        return False

    def _mode_switches(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> list[tuple[tuple[int, int], bool]]:
        """Where ``function`` switches its own first argument's mode, in source order,
        and whether to eval (``self.eval()``) or not (``self.train()``); cached."""
        key = id(function)
        if key not in self._switches:
            arguments = function.args.posonlyargs + function.args.args
            self_name = arguments[0].arg if arguments else None
            found = []
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    mode = _switched_mode(node, self_name)
                    if mode is not None:
                        found.append(((node.lineno, node.col_offset), mode))
            self._switches[key] = sorted(found)
        return self._switches[key]


def _switched_mode(call: ast.Call, self_name: str | None) -> bool | None:
    """``True`` for ``<self_name>.eval()`` or ``.train(False)``, ``False`` for
    ``.train()`` or ``.train(True)``, ``None`` for anything else (another module's
    ``eval()``, a mode the source does not spell out)."""
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == self_name
    ):
        return None
    if func.attr == "eval":
        return True if not call.args and not call.keywords else None
    if func.attr != "train":
        return None
    training = train_flag(call)
    return None if training is None else not training


def _under_a_mode_switch(ctx: FileContext, call: ast.Call) -> bool:
    """The dropout sits in either branch of an ``if`` that reads a switch named for
    inference or evaluation (IMS-Toucan's ``if is_inference:`` with ``F.dropout`` on both
    sides, ``if not self.is_test:``, ``if args.eval_mode:``): the author splits the
    paths per mode by hand, so each side runs only in the mode it was written for.
    Names the dropout itself reads (its tensor, its rate) are data, not the switch."""
    used: set[str] | None = None
    for frame in ctx.frames:
        if frame.kind not in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            continue
        if not isinstance(frame.node, ast.If):
            continue
        if used is None:
            used = _names_in(call)
        if _reads_a_mode_switch(frame.node.test, used):
            return True
    return False


def _names_in(call: ast.Call) -> set[str]:
    """The variable names a call reads."""
    return {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}


def _reads_a_mode_switch(test: ast.expr, data: set[str]) -> bool:
    """``test`` reads a name, other than the ``data`` ones, named for inference or
    evaluation."""
    return any(set(torchapi.name_tokens(name)) & _MODE_WORDS for name in _names_read(test) - data)


def _names_read(test: ast.expr) -> set[str]:
    """The names an ``if`` test reads as switches: operands that are a name or an
    attribute (``args.eval_mode`` gives ``eval_mode``), under ``not``, ``and``, ``or``.
    A name compared or computed with (``n > self.eval_batch``) is a number, not a
    switch."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _names_read(test.operand)
    if isinstance(test, ast.BoolOp):
        return set().union(*(_names_read(value) for value in test.values))
    if isinstance(test, ast.Name):
        return {test.id}
    if isinstance(test, ast.Attribute):
        return {test.attr}
    return set()


# Words of a name that switches between the inference and the training path
# (`is_inference`, `self.is_test`, `eval_mode`, `predicting`).
_MODE_WORDS = frozenset(
    {"inference", "infer", "eval", "evaluation", "evaluating", "test", "testing"}
    | {"predict", "prediction", "predicting"}
)


# What a docstring says of a dropout kept on in evaluation on purpose.
_ALWAYS_ON = (
    "even in eval",
    "in evaluation",
    "at inference",
    "during inference",
    "at test time",
    "always appl",
    "always on",
    "always use",
)


def _documented_always_on(method: FunctionScope) -> bool:
    """The method's or its class's docstring says the dropout stays on in evaluation
    (s3prl's ``Taco2Prenet``: "This module always applies dropout even in evaluation",
    as Tacotron 2's prenet does): written that way on purpose."""
    nodes: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = [method.node]
    if method.owner is not None:
        nodes.append(method.owner.node)
    for node in nodes:
        text = " ".join((ast.get_docstring(node) or "").lower().split())
        if "dropout" in text and any(phrase in text for phrase in _ALWAYS_ON):
            return True
    return False


def _after_an_exit_on_the_mode(ctx: FileContext, method: FunctionScope, call: ast.Call) -> bool:
    """An earlier ``if`` of an enclosing block tests the mode (``if self.training:``, or
    a switch named for it, ``if is_inference:``) and its body always leaves (``return``,
    ``raise``): the dropout sits on the path the code keeps for the other mode, written
    that way on purpose (MC-dropout sampling at evaluation, incremental_learning's
    ``MCCosineClassifier``)."""
    data = _names_in(call)
    for block in _blocks(method.node):
        for index, statement in enumerate(block):
            if spans(statement, call) and any(
                isinstance(earlier, ast.If)
                and (
                    "training" in ctx.segment(earlier.test)
                    or _reads_a_mode_switch(earlier.test, data)
                )
                and isinstance(earlier.body[-1], (ast.Return, ast.Raise))
                for earlier in block[:index]
            ):
                return True
    return False


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """Every block of statements under ``node``, not entering nested functions."""
    found: list[list[ast.stmt]] = []
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        for name in ("body", "orelse", "finalbody"):
            block = getattr(current, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                found.append(block)
                stack.extend(
                    s
                    for s in block
                    if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                )
        for handler in getattr(current, "handlers", []):
            found.append(handler.body)
            stack.extend(handler.body)
    return found


def _switched_by_the_caller(ctx: FileContext, method: FunctionScope, call: ast.Call) -> bool:
    """The dropout sits under an ``if`` that reads a switch the caller hands in with every
    call: a parameter of the method with no default, or a name unpacked from one
    (DeepChem's ``x, dropout_switch = inputs``, fed 0 in predict mode). The caller turns
    it off for evaluation; a parameter with a default, the rate, or a name that only
    shapes the data (``mask``) decides nothing."""
    defaults = method.parameter_defaults
    if _off_by_default(ctx, defaults):
        return True
    built = _attribute_values_built(ctx, method)
    if built and all(_off_by_default(ctx, defaults | values) for values in built):
        return True
    required = method.parameter_names - set(defaults) - {method.self_name or ""}
    if not required:
        return False
    fed = set(required)
    for node in ast.walk(method.node):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name)
            and node.value.id in required
        ):
            fed |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    rate = call.args[1] if len(call.args) > 1 else getattr(keyword(call, "p"), "value", None)
    rate_names = {n.id for n in ast.walk(rate) if isinstance(n, ast.Name)} if rate else set()
    tensor = call.args[0] if call.args else None
    tensor_names = {n.id for n in ast.walk(tensor) if isinstance(n, ast.Name)} if tensor else set()
    for frame in ctx.frames:
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE) and isinstance(frame.node, ast.If):
            tested = {n.id for n in ast.walk(frame.node.test) if isinstance(n, ast.Name)}
            if any(
                set(torchapi.name_tokens(name)) & _SWITCH_WORDS
                for name in (tested - rate_names - tensor_names) & fed
            ):
                return True
    return False


def _off_by_default(ctx: FileContext, defaults: dict[str, ast.expr]) -> bool:
    """The dropout sits in a branch of ``if <switch>:`` (or ``if not <switch>:``) that a
    parameter's constant default leaves untaken (Protenix's ``mc_dropout: bool = False``,
    Monte Carlo dropout its inference path asks for per sample): it runs only when the
    caller turns it on. ``defaults`` are the method's parameter defaults."""
    for frame in ctx.frames:
        if frame.kind not in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            continue
        test = frame.node.test if isinstance(frame.node, ast.If) else None
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        switch = test.operand if negated else test  # type: ignore[union-attr]
        holds = _holds_by_default(switch, defaults)
        if holds is not None and (holds != negated) != (frame.kind is FrameKind.IF_BODY):
            return True
    return False


def _attribute_values_built(ctx: FileContext, method: FunctionScope) -> list[dict[str, ast.expr]]:
    """For each construction of the method's class the project shows, the constant value
    of each attribute the class binds once, in its ``__init__``, straight from a
    parameter of ``__init__``, keyed ``self.<attr>`` (Precipitation-Nowcasting's
    TrajGRU: ``self._zoneout = zoneout``, built with ``zoneout=0.0`` by every network
    definition). With no construction in sight, the parameter's default counts once.
    Empty when the class is also used as a value (a base, a factory argument)."""
    owner = method.owner
    init = owner.methods.get("__init__") if owner is not None else None
    if owner is None or init is None or method.self_name is None:
        return []
    parameters = set(init.parameter_names)
    taken: dict[str, str] = {}  # attribute -> the __init__ parameter it is bound from
    bound: dict[str, int] = {}
    for member in owner.methods.values():
        for node in ast.walk(member.node):
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if not (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == member.self_name
                ):
                    continue
                bound[target.attr] = bound.get(target.attr, 0) + 1
                if member is init and isinstance(value, ast.Name) and value.id in parameters:
                    taken[target.attr] = value.id
    taken = {attr: parameter for attr, parameter in taken.items() if bound[attr] == 1}
    if not taken:
        return []
    calls = class_constructions(ctx, owner)
    if calls is None:
        return []
    passed: list[dict[str, object]]
    if not calls:
        defaults = init.parameter_defaults
        passed = [{p: d.value for p, d in defaults.items() if isinstance(d, ast.Constant)}]
    else:
        passed = [constant_arguments(call, init) for call in calls]
    return [
        {
            f"{method.self_name}.{attr}": ast.Constant(cast(_Literal, values[parameter]))
            for attr, parameter in taken.items()
            if parameter in values
        }
        for values in passed
    ]


# What a literal constant in the source holds.
_Literal = str | bytes | bool | int | float | complex | None


def _switch_name(expr: ast.expr) -> str | None:
    """A switch's name as the defaults spell it: ``flag``, or ``self.flag``."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return f"{expr.value.id}.{expr.attr}"
    return None


def _holds_by_default(test: ast.expr | None, defaults: dict[str, ast.expr]) -> bool | None:
    """What ``test`` gives with the method's constant defaults: a switch named for
    dropout or the mode (``mc_dropout``), or a rate compared with a number
    (latent-diffusion's ``if noise_dropout > 0.:`` under ``noise_dropout=0.``); ``None``
    when it is neither or a default is not a constant. An attribute the class binds
    from a parameter of its ``__init__`` counts with the value a construction passes."""
    name = _switch_name(test) if test is not None else None
    if name is not None:
        default = defaults.get(name)
        words = set(torchapi.name_tokens(name.rpartition(".")[2]))
        if words & _SWITCH_WORDS and isinstance(default, ast.Constant):
            return bool(default.value)
        return None
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
    ):
        return None
    left = _switch_name(test.left)
    default = defaults.get(left) if left is not None else None
    bound = test.comparators[0].value
    if not (
        isinstance(default, ast.Constant)
        and isinstance(default.value, (int, float))
        and isinstance(bound, (int, float))
        and not isinstance(default.value, bool)
    ):
        return None
    return compared(default.value, test.ops[0], bound)


# Words of a name that switches dropout per call (`dropout_switch`, `mc_dropout`,
# `is_training`, flax's `deterministic`), not of one that only shapes the data (`mask`,
# `edge_index`).
_SWITCH_WORDS = frozenset(
    {"dropout", "drop", "switch", "train", "training", "mode", "mc", "stochastic", "uncertainty"}
    | {"deterministic"}
)


def _rate_follows_mode(ctx: FileContext, method: FunctionScope, call: ast.Call) -> bool:
    """The rate is a parameter of the method that every ``self.<method>(...)`` call of
    the file (in the class, or in a base class of the file that calls the override) sets
    from the mode (``dropout_p=0.0 if not self.training else p``), or is such a
    conditional expression itself, in the call or bound to a name of the method: in eval
    mode the dropout runs at rate 0, which changes nothing."""
    rate = call.args[1] if len(call.args) > 1 else getattr(keyword(call, "p"), "value", None)
    if isinstance(rate, ast.Name):
        found = ctx.lookup(rate, method)
        if found is not None and found[0].kind is BindingKind.ASSIGN and found[0].value:
            value = found[0].value
            rate = value if isinstance(value, ast.IfExp) else rate
    if isinstance(rate, ast.IfExp):
        # safari's `F.dropout(x, self.dropout_p if self.training else 0.0)`: the rate is
        # the mode's own, 0 outside training
        return "training" in ctx.segment(rate.test) and any(
            isinstance(branch, ast.Constant) and branch.value == 0
            for branch in (rate.body, rate.orelse)
        )
    if not isinstance(rate, ast.Name) or method.owner is None:
        return False
    if rate.id not in {a.arg for a in method.node.args.args + method.node.args.kwonlyargs}:
        return False
    passed = [method.argument_for(node, rate.id) for node in _self_calls(ctx, method.name)]
    return bool(passed) and all(
        value is not None and "training" in ctx.segment(value) for value in passed
    )


def _rate_handed_in(ctx: FileContext, method: FunctionScope, call: ast.Call) -> str | None:
    """The parameter, with no default, that the dropout's rate is: each call of the method
    chooses the rate, so an evaluating caller may pass 0 (lint does not follow calls made
    through a module's ``__call__`` into other files). Not when a ``self.<method>(...)``
    call of the file hands it a fixed rate (``self.attend(x, self.dropout)``, ``0.1``),
    the same in both modes."""
    rate = call.args[1] if len(call.args) > 1 else getattr(keyword(call, "p"), "value", None)
    if not isinstance(rate, ast.Name) or rate.id == method.self_name:
        return None
    required = method.parameter_names - set(method.parameter_defaults)
    if rate.id not in required:
        return None
    for caller in _self_calls(ctx, method.name):
        passed = method.argument_for(caller, rate.id)
        if isinstance(passed, ast.Attribute) or (
            isinstance(passed, ast.Constant) and passed.value not in (0, None)
        ):
            return None
    return rate.id


def _rate_zeroed_by_a_caller(ctx: FileContext, method: FunctionScope, call: ast.Call) -> bool:
    """The rate is computed from parameters of the method, and a ``self.<method>(...)``
    call of the file passes constants that make it 0 (HCCF's ``F.dropout(x, p=1 -
    keep_rate)``, which ``full_predict`` calls with ``keep_rate=1.0``): the callers choose
    the rate per call, and the one that evaluates turns the dropout off."""
    rate = call.args[1] if len(call.args) > 1 else getattr(keyword(call, "p"), "value", None)
    if rate is None or method.owner is None:
        return False
    parameters = {a.arg for a in method.node.args.args + method.node.args.kwonlyargs}
    used = {n.id for n in ast.walk(rate) if isinstance(n, ast.Name)}
    if not used or not used <= parameters - {method.self_name}:
        return False
    return any(
        _evaluates_to_zero(rate, {name: method.argument_for(node, name) for name in used})
        for node in _self_calls(ctx, method.name)
    )


def _self_calls(ctx: FileContext, name: str) -> list[ast.Call]:
    """Every ``self.<name>(...)`` call in the methods of the file's classes, read from the
    tree (the rule runs while the file is walked, before its later methods are known)."""
    found = []
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for method in node.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not method.args.args:
                continue
            self_name = method.args.args[0].arg
            found += [
                call
                for call in ast.walk(method)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == name
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == self_name
            ]
    return found


def _evaluates_to_zero(expr: ast.expr, values: dict[str, ast.expr | None]) -> bool:
    """Whether ``expr``, arithmetic over names given constant ``values``, is 0."""

    def value(node: ast.expr) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            given = values.get(node.id)
            if given is None or given is node:
                raise ValueError(node.id)
            return value(given)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            return left - right if isinstance(node.op, ast.Sub) else left * right
        raise ValueError(ast.dump(node))

    try:
        return value(expr) == 0.0
    except (ValueError, RecursionError):
        return False
