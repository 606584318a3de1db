"""The shared per-file context every lint rule asks its questions through.

:class:`FileContext` is built in three layers, one concept each:
:class:`~torchdoctor.static.source_text.SourceText` (the text, node positions, locations
and edits), :class:`~torchdoctor.static.names.NameResolver` (imports, bindings, the file's
functions and classes) and, here, the classes values are built from and the torch families
they belong to. Rules never string-match ``node.func.attr`` against torch names: they ask
``ctx.is_call_to(call, "torch.nn.CrossEntropyLoss")`` or ``ctx.family_of(receiver)``.
"""

from __future__ import annotations

import ast
from typing import cast

from torchdoctor.findings import Confidence
from torchdoctor.static import torchapi
from torchdoctor.static.bindings import Binding, BindingKind
from torchdoctor.static.names import CURRENT, NameResolver, Scope, ScopeArg
from torchdoctor.static.project import ClassInfo, ProjectIndex, single_file_index
from torchdoctor.static.structure import FunctionScope

__all__ = ["CURRENT", "FileContext", "Scope"]

# Methods that return their receiver (``model.to(device)`` is still the model).
_SELF_RETURNING = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "float",
        "double",
        "half",
        "bfloat16",
        "requires_grad_",
        "share_memory",
        "apply",
        "type",
        "to_empty",
        "xpu",
        "mps",
    }
)
# Wrappers whose result is (or behaves as) their first argument.
_TRANSPARENT_CALLS = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})
_MAX_DEPTH = 8


class FileContext(NameResolver):
    """Everything rules may ask about one file. Built by the engine, one per file.

    Besides what :class:`SourceText` (``path``, ``source``, ``lines``, ``tree``) and
    :class:`NameResolver` (``module``, ``imports``, ``function``, ``frames``) hold:

    Attributes:
        memo: a per-file cache rules and helpers may use (key by a tuple naming the owner).
        project: the :class:`~torchdoctor.static.project.ProjectIndex` of every file
            linted with this one (built lazily from this file alone when none is given).
        project_path: the path inside its project (``tests/test_x.py``), by which test
            code is told (:mod:`~torchdoctor.static.severity_in_tests`); ``None`` when
            unknown or when the user asked for test code to be judged like any other.
    """

    def __init__(
        self,
        path: str,
        source: str,
        tree: ast.Module,
        project: ProjectIndex | None = None,
        project_path: str | None = None,
    ) -> None:
        super().__init__(path, source, tree)
        self._types: dict[tuple[int, int], str | None] = {}
        self.memo: dict[object, object] = {}
        self._project = project
        self.project_path = project_path

    @property
    def project(self) -> ProjectIndex:
        """The project index (see :mod:`torchdoctor.static.project`)."""
        if self._project is None or self._project.facts_for(self.path) is None:
            own = single_file_index(self.path, self.tree)
            if self._project is None:
                self._project = own
            else:  # a file linted with an index built without it (lint_text callers)
                facts = own.facts_for(self.path)
                if facts is not None:
                    self._project.add(facts)
        return self._project

    def project_class_of(self, expr: ast.AST, scope: ScopeArg = CURRENT) -> ClassInfo | None:
        """The project class (any linted file) of the value ``expr`` evaluates to, when
        the code shows it (see :meth:`instance_type`); ``None`` otherwise."""
        type_name = self.instance_type(expr, scope)
        if type_name is None:
            return None
        return self.project.module_class(type_name, near=self.path)

    def project_class_named(self, type_name: str) -> ClassInfo | None:
        """The project class for a name :meth:`instance_type` gave, if it is one."""
        return self.project.module_class(type_name, near=self.path)

    def instance_type(
        self, expr: ast.AST, scope: ScopeArg = CURRENT, _depth: int = 0
    ) -> str | None:
        """The class (qualified name, or ``"<local>.Name"`` for a class of this file) of
        the value ``expr`` evaluates to, when the file shows it; else ``None``."""
        scope = self._scope(scope)
        key = (id(expr), id(scope))
        if key in self._types:
            return self._types[key]
        self._types[key] = None  # cycle guard
        result = None if _depth > _MAX_DEPTH else self._infer(expr, scope, _depth + 1)
        self._types[key] = result
        return result

    def _infer(self, expr: ast.AST, scope: Scope, depth: int) -> str | None:
        if isinstance(expr, ast.Call):
            return self._infer_call(expr, scope, depth)
        if isinstance(expr, ast.Name):
            found = self.lookup(expr, scope)
            if found is not None and found[0].kind is BindingKind.UNPACKED:
                source = self.unpacked_source(expr.id, found[0], found[1])
                return None if source is None else self.instance_type(source[0], source[1], depth)
            return None if found is None else self._infer_binding(found[0], found[1], depth)
        if isinstance(expr, ast.Attribute):
            found = self.attribute_binding(expr, scope)
            if found is not None:
                return self._infer_binding(found[0], found[1], depth)
        return None

    def _passed_value_type(self, value: ast.expr, scope: Scope, depth: int) -> str | None:
        """The class of a value a caller passes: as :meth:`instance_type`, and for
        ``model.encoder`` a layer the model's class builds (read only here, where what a
        helper is handed matters: asking it of every attribute would cost every rule)."""
        found = self.instance_type(value, scope, depth)
        if found is None and isinstance(value, ast.Attribute):
            return self._layer_type(value, scope, depth)
        return found

    def _layer_type(self, expr: ast.Attribute, scope: Scope, depth: int) -> str | None:
        """``model.encoder`` on an instance of a project class whose ``__init__`` builds
        ``self.encoder`` from a torch class (``nn.Sequential(...)``): that class."""
        if not isinstance(expr.value, (ast.Name, ast.Attribute)):
            return None
        owner = self.instance_type(expr.value, scope, depth)
        if owner is None or owner.startswith("torch."):
            return None  # torch's own classes build no project layers
        key = ("layers-of", owner)
        if key not in self.memo:
            self.memo[key] = self.project_class_named(owner)
        info = cast("ClassInfo | None", self.memo[key])
        built = info.attributes.get(expr.attr) if info is not None else None
        return built if built is not None and built.startswith("torch.") else None

    def _infer_call(self, call: ast.Call, scope: Scope, depth: int) -> str | None:
        func = call.func
        qualified = self.qualified_name(func, scope)
        if qualified in _TRANSPARENT_CALLS and call.args:
            return self.instance_type(call.args[0], scope, depth)
        if qualified is not None:
            return self._returned_by(qualified) or qualified
        if isinstance(func, ast.Name):
            local = self.local_class(func.id)
            if local is not None:
                return f"<local>.{local.name}"
            relative = self.relative_imports.get(func.id)
            if relative is not None:
                return self._returned_by(relative) or relative
            own = self.project.facts_for(self.path)
            if own is not None and func.id in own.functions:
                return self._returned_by(f"{own.name}.{func.id}")
        if isinstance(func, ast.Attribute) and func.attr in _SELF_RETURNING:
            return self.instance_type(func.value, scope, depth)
        return None

    def _returned_by(self, qualified: str) -> str | None:
        """The class a project function always returns (``build_model()`` whose every
        ``return`` builds a ``Net``), as a qualified name; ``None`` otherwise."""
        function = self.project.function(qualified, near=self.path)
        if function is None or not function.returns:
            return None
        kinds = set(function.returns)
        if len(kinds) != 1:
            return None
        returned = kinds.pop()
        if returned.startswith("<") or self.project.function(returned, near=self.path):
            return None  # a value, or another function's result: not followed further
        own = self.project.facts_for(self.path)
        if own is not None and returned.startswith(own.name + "."):
            local = returned[len(own.name) + 1 :]
            if self.local_class(local) is not None:
                return f"<local>.{local}"  # how this file's own classes are spelled
        return returned

    def _infer_binding(self, binding: Binding, scope: Scope, depth: int) -> str | None:
        if binding.kind is BindingKind.PARAMETER or binding.annotation is not None:
            if binding.annotation is None:
                return self._passed_type(binding, scope, depth)
            annotated = self.qualified_name(binding.annotation, scope) or self._local_name(
                binding.annotation
            )
            if annotated == "torch.nn.Module" and binding.kind is BindingKind.PARAMETER:
                # `model: nn.Module` says little; what every caller passes says more
                return self._passed_type(binding, scope, depth) or annotated
            return annotated
        if binding.kind in (BindingKind.ASSIGN, BindingKind.WITH_TARGET) and binding.value:
            return self.instance_type(binding.value, scope, depth)
        return None

    def _passed_type(self, binding: Binding, scope: Scope, depth: int) -> str | None:
        """A parameter's class when every call of its function in this file passes an
        instance of that one class (``train(model, ...)`` called with ``Net()``); ``None``
        when a call leaves it to its default or the calls disagree, and while the walk
        has not yet seen every call."""
        if not self.walked or not isinstance(scope, FunctionScope):
            return None
        if not isinstance(binding.node, ast.arg):
            return None
        key = ("passed-type", id(binding.node))
        if key in self.memo:  # once per parameter (None while being computed: a cycle)
            return cast("str | None", self.memo[key])
        self.memo[key] = None
        found: set[str | None] = set()
        for caller, call in self._calls_of(scope):
            value = scope.argument_for(call, binding.node.arg)
            found.add(None if value is None else self._passed_value_type(value, caller, depth))
            if len(found) > 1 or None in found:
                return None
        result = self.memo[key] = found.pop() if found else None
        return result

    def _calls_of(self, function: FunctionScope) -> list[tuple[Scope, ast.Call]]:
        """The file's calls of a function, or of a class's ``__init__``: ``Trainer(...)``."""
        calls = [
            (caller, item.node)
            for caller, item in self.callers(function)
            if isinstance(item.node, ast.Call)
        ]
        owner = function.owner
        if owner is None or function.name != "__init__":
            return calls
        key = ("constructions", id(owner))
        built = self.memo.get(key)
        if built is None:
            built = self.memo[key] = [
                (scope, item.node)
                for scope, items in self.module.bodies()
                for item in items
                if isinstance(item.node, ast.Call)
                and isinstance(item.node.func, ast.Name)
                and self.local_class(item.node.func.id) is owner
            ]
        return [*calls, *cast("list[tuple[Scope, ast.Call]]", built)]

    def _local_name(self, annotation: ast.expr) -> str | None:
        if isinstance(annotation, ast.Name) and self.local_class(annotation.id) is not None:
            return f"<local>.{annotation.id}"
        return None

    def is_family(self, type_name: str, family: str, _seen: frozenset[str] = frozenset()) -> bool:
        """Whether the class ``type_name`` (from :meth:`instance_type`) is in ``family``."""
        if not type_name.startswith("<local>."):
            if torchapi.in_family(type_name, family):
                return True
            return self._project_in_family(type_name, family)
        cls = self.local_class(type_name[len("<local>.") :])
        if cls is None or type_name in _seen or len(_seen) > _MAX_DEPTH:
            return False
        for base in cls.node.bases:
            base_name = self.qualified_name(base) or self._local_name(base)
            if base_name and self.is_family(base_name, family, _seen | {type_name}):
                return True
        return False

    def _project_in_family(self, type_name: str, family: str, depth: int = 0) -> bool:
        """A class of another linted file is in ``family`` when one of its bases is."""
        if depth > _MAX_DEPTH or type_name.partition(".")[0] == "torch":
            return False
        info = self.project.module_class(type_name, near=self.path)
        if info is None:
            return False
        return any(
            torchapi.in_family(base, family)
            or (base != type_name and self._project_in_family(base, family, depth + 1))
            for base in info.bases
        )

    def family_of(self, expr: ast.AST, scope: ScopeArg = CURRENT) -> tuple[str, Confidence] | None:
        """Which family (:mod:`torchapi` constant) ``expr``'s value belongs to.

        The inferred class decides with high confidence. When the class cannot be seen,
        the variable's name decides (``optimizer``, ``sched``, ``model``...) with medium
        confidence. A value of a known class outside every family gives ``None``.
        """
        type_name = self.instance_type(expr, scope)
        if type_name is not None:
            for family in torchapi.FAMILIES:
                if self.is_family(type_name, family):
                    return family, Confidence.HIGH
            return None
        name = _hint_name(expr)
        hinted = torchapi.hinted_family(name) if name else None
        return (hinted, Confidence.MEDIUM) if hinted else None

    def is_in_family(self, expr: ast.AST, family: str, scope: ScopeArg = CURRENT) -> bool:
        """Shorthand: whether :meth:`family_of` gives ``family``."""
        found = self.family_of(expr, scope)
        return found is not None and found[0] == family


def _hint_name(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None
