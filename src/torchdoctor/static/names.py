"""Names in one file: imports, bindings and the functions and classes they refer to.

:class:`NameResolver` is the middle layer of
:class:`~torchdoctor.static.context.FileContext`. It resolves a dotted name through the
file's imports (``import torch as T``, ``from torch import nn``, ``from torch.optim import
AdamW as Opt``) and local aliases, finds what a name or ``self.attr`` was bound to, and
which function of the file a call runs. It holds the file's structure, which the walker
fills while it traverses the tree.
"""

from __future__ import annotations

import ast
import bisect
import functools
from collections.abc import Iterable

from torchdoctor.static import torchapi
from torchdoctor.static.bindings import Binding, BindingKind, attribute_bindings, scope_bindings
from torchdoctor.static.source_text import SourceText
from torchdoctor.static.structure import (
    ClassScope,
    Frame,
    FrameKind,
    FunctionScope,
    Item,
    ModuleScope,
)

__all__ = ["CURRENT", "NameResolver", "Scope", "ScopeArg", "is_none", "returns_of"]

Scope = FunctionScope | None  # None: module level


class _Current:
    """Default of every ``scope`` argument: the scope the traversal is in now."""

    def __repr__(self) -> str:
        return "CURRENT"


CURRENT = _Current()
ScopeArg = FunctionScope | None | _Current
_MAX_DEPTH = 8


class NameResolver(SourceText):
    """Imports, bindings and the file's functions and classes.

    Attributes:
        module: the file's structure (loops, functions, classes), filled by the traversal.
        imports: local name -> qualified name, from every import statement in the file.
        function: the function the traversal is in right now (``None`` at module level).
        frames: the blocks around the node the traversal is at right now.
        scopes: ``def`` node -> its :class:`FunctionScope`.
        walked: whether the walk has recorded every call of the file (so that
            :meth:`callers` may be asked).
        function_index: name -> the last function (not method) of that name seen so far.
        class_index: name -> the last class of that name seen so far.
        classes: ``class`` node -> its :class:`ClassScope`.
    """

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        super().__init__(path, source, tree)
        self.module = ModuleScope(tree, Frame(FrameKind.MODULE, tree))
        self.imports: dict[str, str] = {}
        self.relative_imports: dict[str, str] = {}
        self.function: FunctionScope | None = None
        self.frames: tuple[Frame, ...] = (self.module.frame,)
        self.scopes: dict[ast.AST, FunctionScope] = {}
        self.function_index: dict[str, FunctionScope] = {}
        self.class_index: dict[str, ClassScope] = {}
        self.classes: dict[ast.AST, ClassScope] = {}
        self._tables: dict[ast.AST, dict[str, list[Binding]]] = {}
        self._sorted: dict[tuple[ast.AST, str], tuple[list[tuple[int, int]], list[Binding]]] = {}
        self._attributes: dict[ast.AST, dict[str, list[tuple[Binding, ast.AST]]]] = {}
        self._aliases: dict[tuple[int, int], str | None] = {}
        self._callers: dict[int, list[tuple[Scope, Item]]] | None = None
        # Set once the walk has recorded every item of the file (what :meth:`callers` reads).
        self.walked = False
        # Import statements recorded so far: with the counts of functions and classes,
        # what changes the answers of name resolution while the walk goes on.
        self.import_count = 0
        self._alias_facts: tuple[frozenset[str], tuple[int, int]] | None = None

    # --- imports and qualified names ------------------------------------------------------

    def add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Record the names an import statement binds (called by the engine)."""
        self.import_count += 1
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = alias.name
                else:
                    root = alias.name.partition(".")[0]
                    self.imports[root] = root
            return
        if node.level:
            self._add_relative_import(node)
            return
        if not node.module:
            return
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _add_relative_import(self, node: ast.ImportFrom) -> None:
        """``from .net import Net``: recorded apart (for the project index), so that
        :meth:`qualified_name` keeps answering only for absolute imports."""
        from torchdoctor.static.project_facts import module_name

        own = module_name(self.path).split(".")
        package = own if self.path.endswith("__init__.py") else own[:-1]
        package = package[: len(package) - node.level + 1] if node.level > 1 else package
        base = ".".join([*package, *([node.module] if node.module else [])])
        for alias in node.names:
            if alias.name != "*":
                self.relative_imports[alias.asname or alias.name] = (
                    f"{base}.{alias.name}" if base else alias.name
                )

    def qualified_name(
        self, expr: ast.AST, scope: ScopeArg = CURRENT, _depth: int = 0
    ) -> str | None:
        """The canonical dotted name an expression refers to, through imports.

        ``T.optim.SGD`` after ``import torch as T`` gives ``"torch.optim.SGD"``; a local
        alias (``Adam = torch.optim.Adam``) is followed. ``None`` when the root is not
        imported.
        """
        parts: list[str] = []
        node = expr
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.imports.get(node.id)
        if root is None:
            if _depth >= _MAX_DEPTH:
                return None
            key = (id(node), id(self._scope(scope)))
            if key in self._aliases:
                root = self._aliases[key]
            else:
                self._aliases[key] = None  # cycle guard
                root = self._aliases[key] = self._alias_root(node, scope, _depth)
            if root is None:
                return None
        return torchapi.canonical(".".join([root, *reversed(parts)]))

    def _alias_root(self, name: ast.Name, scope: ScopeArg, depth: int) -> str | None:
        """The qualified name a local alias stands for (``Adam = torch.optim.Adam``)."""
        if name.id not in self._statement_facts()[0]:
            return None  # never assigned a name or an attribute: no alias (most names)
        found = self.lookup(name, scope)
        if found is None:
            return None
        binding, owner = found
        if binding.kind is not BindingKind.ASSIGN or not isinstance(
            binding.value, (ast.Name, ast.Attribute)
        ):
            return None
        return self.qualified_name(binding.value, owner, depth + 1)

    def _statement_facts(self) -> tuple[frozenset[str], tuple[int, int]]:
        facts = self._alias_facts
        if facts is None:
            facts = self._alias_facts = _alias_names(self.tree)
        return facts

    def imports_final_at(self, node: ast.AST) -> bool:
        """Whether no import statement of the file comes after ``node``: the walk
        records imports in source order, so every name resolved from here on resolves as
        it will at the end of the walk (a query made now or later gives one answer)."""
        position = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        return self._statement_facts()[1] < position

    def is_call_to(self, call: ast.AST, *names: str, scope: ScopeArg = CURRENT) -> bool:
        """Whether ``call`` is a call of one of the qualified ``names`` (any spelling)."""
        if not isinstance(call, ast.Call):
            return False
        func = call.func
        if func.__class__ is ast.Attribute and func.attr not in _last_names(names):
            return False  # `a.b.zero_grad()` can only be some `....zero_grad`: no lookup
        qualified = self.qualified_name(func, scope)
        return qualified is not None and qualified in _canonical_set(names)

    # --- bindings -----------------------------------------------------------------------

    def binding(self, name: ast.Name, scope: ScopeArg = CURRENT) -> Binding | None:
        """What ``name`` was bound to: the latest binding before it in its scope.

        Looks in ``scope`` (default: the current function), then the functions around it,
        then the module. Falls back to the first binding after the use (a loop body that
        binds a name late). ``None`` when the name is never bound in the file.
        """
        found = self.lookup(name, scope)
        return None if found is None else found[0]

    def lookup(self, name: ast.Name, scope: ScopeArg = CURRENT) -> tuple[Binding, Scope] | None:
        """Like :meth:`binding`, also giving the scope the binding belongs to."""
        current = self._scope(scope)
        position = (name.lineno, name.col_offset)
        while True:
            owner: ast.AST = current.node if current is not None else self.tree
            found = self._nearest(owner, name.id, position)
            if found is not None:
                return found, current
            if current is None:
                return None
            current = current.parent

    def attribute_binding(
        self, attr: ast.Attribute, scope: ScopeArg = CURRENT
    ) -> tuple[Binding, Scope] | None:
        """What ``self.attr`` was bound to in the class of the current method, if anywhere."""
        method = self._scope(scope)
        if (
            method is None
            or method.owner is None
            or not isinstance(attr.value, ast.Name)
            or attr.value.id != method.self_name
        ):
            return None
        table = self._attributes.get(method.owner.node)
        if table is None:
            table = self._attributes[method.owner.node] = attribute_bindings(method.owner.node)
        found = table.get(attr.attr)
        if not found:
            return None
        for binding, method_node in found:
            if binding.value is not None and not is_none(binding.value):
                return binding, self.scopes.get(method_node)
        binding, method_node = found[0]
        return binding, self.scopes.get(method_node)

    def unpacked_source(
        self, name: str, binding: Binding, scope: Scope
    ) -> tuple[ast.expr, Scope] | None:
        """Where a name unpacked from a call of a local function gets its value.

        ``model, loader = make()``, with ``make`` a function of this file whose last
        ``return`` of that length is ``return Net(), DataLoader(...)``, gives ``Net()`` (and
        ``make``'s scope) for ``model``. ``None`` for any other unpacking.
        """
        statement, value = binding.node, binding.value
        if (
            binding.kind is not BindingKind.UNPACKED
            or not isinstance(value, ast.Call)
            or not isinstance(statement, ast.Assign)
            or len(statement.targets) != 1
        ):
            return None
        target = statement.targets[0]
        if not isinstance(target, (ast.Tuple, ast.List)):
            return None
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        if name not in names or any(isinstance(e, ast.Starred) for e in target.elts):
            return None
        function = self.resolve_local_call(value, scope)
        if function is None:
            return None
        found = None
        for node in returns_of(function.node):
            if (
                isinstance(node.value, (ast.Tuple, ast.List))
                and len(node.value.elts) == len(names)
                and not any(isinstance(e, ast.Starred) for e in node.value.elts)
            ):
                found = node.value.elts[names.index(name)]
        return None if found is None else (found, function)

    def _scope(self, scope: ScopeArg) -> Scope:
        return self.function if isinstance(scope, _Current) else scope

    def _nearest(self, owner: ast.AST, name: str, position: tuple[int, int]) -> Binding | None:
        """The last binding of ``name`` in ``owner`` before ``position``, else its first
        one; bindings whose statement contains ``position`` do not count (in
        ``x = f(x)`` the ``x`` on the right is the previous binding). A binary search
        over the bindings sorted once per name: a name bound thousands of times in one
        long function costs a few steps per lookup, not a scan."""
        key = (owner, name)
        ordered = self._sorted.get(key)
        if ordered is None:
            bindings = sorted(self._table(owner).get(name, ()), key=_position_of)
            ordered = self._sorted[key] = ([b.position for b in bindings], bindings)
        positions, bindings = ordered
        if not bindings:
            return None
        index = bisect.bisect_left(positions, position)
        for candidate in range(index - 1, -1, -1):
            if not _encloses(bindings[candidate], position):
                return bindings[candidate]
        for candidate in range(index, len(bindings)):
            if not _encloses(bindings[candidate], position):
                return bindings[candidate]
        return None

    def _table(self, owner: ast.AST) -> dict[str, list[Binding]]:
        table = self._tables.get(owner)
        if table is None:
            table = self._tables[owner] = scope_bindings(owner)
        return table

    # --- functions and classes ----------------------------------------------------------

    def local_class(self, name: str) -> ClassScope | None:
        """The class of this file called ``name`` (the last one defined), if any."""
        return self.class_index.get(name)

    def function_of(self, frames: Iterable[Frame]) -> FunctionScope | None:
        """The innermost function among ``frames`` (an :class:`Item`'s), if any."""
        found = None
        for frame in frames:
            if frame.kind is FrameKind.FUNCTION:
                found = self.scopes.get(frame.node)
        return found

    def resolve_local_call(self, call: ast.Call, scope: ScopeArg = CURRENT) -> FunctionScope | None:
        """The function of this file that ``call`` calls: ``helper(...)`` or
        ``self.helper(...)`` inside a method; ``None`` when it cannot be seen."""
        scope = self._scope(scope)
        func = call.func
        if isinstance(func, ast.Name):
            return self.function_index.get(func.id)
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and scope is not None
            and scope.owner is not None
            and func.value.id == scope.self_name
        ):
            return scope.owner.methods.get(func.attr)
        return None

    def callers(self, function: FunctionScope) -> list[tuple[Scope, Item]]:
        """Every call of ``function`` in this file, with the scope it is made from, in file
        order. Reads the recorded items: ask once the file has been walked."""
        if self._callers is None:
            sites: dict[int, list[tuple[Scope, Item]]] = {}
            for scope, items in self.module.bodies():
                for item in items:
                    if isinstance(item.node, ast.Call):
                        callee = self.resolve_local_call(item.node, scope)
                        if callee is not None:
                            sites.setdefault(id(callee), []).append((scope, item))
            self._callers = sites
        return self._callers.get(id(function), [])


@functools.lru_cache(maxsize=1024)
def _canonical_set(names: tuple[str, ...]) -> frozenset[str]:
    """The canonical spellings of names a rule asks about (the same few tuples, asked
    for every call of a file)."""
    return frozenset(torchapi.canonical(n) for n in names)


@functools.lru_cache(maxsize=1024)
def _last_names(names: tuple[str, ...]) -> frozenset[str]:
    """The last components of qualified names (``torch.load`` -> ``load``): a call
    ``x.y.load(...)`` can only be one of them when its attribute is (canonical spellings
    keep the last component)."""
    return frozenset(n.rpartition(".")[2] for n in names)


def _alias_names(tree: ast.Module) -> tuple[frozenset[str], tuple[int, int]]:
    """Every name an assignment anywhere in the file binds to a name or an attribute
    (``Adam = optim.Adam``, ``a, b = x, y.z``): the only names that can be aliases (an
    ``ASSIGN`` binding of such a value, see :mod:`~torchdoctor.static.bindings`); and the
    position of the file's last import statement (``(0, 0)`` for none). One pass over the
    statements, cheaper than the binding tables of every function it spares."""
    names: set[str] = set()
    last_import = (0, 0)
    stack: list[ast.AST] = list(tree.body)
    fields_of = _NESTED_BLOCKS
    while stack:
        statement = stack.pop()
        cls = statement.__class__
        if cls is ast.Assign:
            for target in statement.targets:  # type: ignore[attr-defined]
                _add_alias_targets(target, statement.value, names)  # type: ignore[attr-defined]
        elif cls is ast.AnnAssign:
            _add_alias_targets(statement.target, statement.value, names)  # type: ignore[attr-defined]
        elif cls is ast.Import or cls is ast.ImportFrom:
            position = (statement.lineno, statement.col_offset)  # type: ignore[attr-defined]
            last_import = max(last_import, position)
        fields = fields_of.get(cls)
        if fields is None:
            fields = fields_of[cls] = tuple(
                f
                for f in ("body", "orelse", "finalbody", "handlers", "cases")
                if f in getattr(cls, "_fields", ())
            )
        for field in fields:
            stack.extend(getattr(statement, field))
    return frozenset(names), last_import


# Per node class, the fields of :func:`_alias_names`'s walk that hold statements (or
# except handlers and match cases, whose bodies do).
_NESTED_BLOCKS: dict[type, tuple[str, ...]] = {}


def _add_alias_targets(target: ast.expr, value: ast.expr | None, names: set[str]) -> None:
    """The names ``target = value`` binds to a name or an attribute (as
    :func:`~torchdoctor.static.bindings.scope_bindings` pairs them)."""
    if isinstance(target, ast.Name):
        if isinstance(value, (ast.Name, ast.Attribute)):
            names.add(target.id)
    elif (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(value.elts) == len(target.elts)
    ):
        for sub_target, sub_value in zip(target.elts, value.elts, strict=True):
            _add_alias_targets(sub_target, sub_value, names)


def returns_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The ``return`` statements of a function, in source order, nested scopes excluded."""
    found: list[ast.Return] = []
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(
                reversed([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)])
            )
    return found


def own_nodes(scope: ast.AST) -> list[ast.AST]:
    """Every node of a scope's own code (a module's or a function's body), without those
    of the functions, lambdas and classes it defines, whose names are their own."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _position_of(binding: Binding) -> tuple[int, int]:
    return binding.position


def _encloses(binding: Binding, position: tuple[int, int]) -> bool:
    """Whether a use at ``position`` is inside the assignment that makes ``binding``."""
    if binding.kind not in (BindingKind.ASSIGN, BindingKind.UNPACKED):
        return False
    node = binding.node
    end = (getattr(node, "end_lineno", None) or 0, getattr(node, "end_col_offset", None) or 0)
    return binding.position <= position < end


def is_none(expr: ast.expr) -> bool:
    """Whether ``expr`` is the literal ``None``."""
    return isinstance(expr, ast.Constant) and expr.value is None
