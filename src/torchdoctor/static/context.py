"""The shared per-file context every lint rule asks its questions through.

:class:`FileContext` holds the source, resolves names through the file's imports
(``import torch as T``, ``from torch import nn``, ``from torch.optim import AdamW as Opt``),
looks up what a name or ``self.attr`` was bound to, infers the class of a value and builds
locations and text edits from node positions. Rules never string-match ``node.func.attr``
against torch names: they ask ``ctx.is_call_to(call, "torch.nn.CrossEntropyLoss")`` or
``ctx.family_of(receiver)``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from torchdoctor.findings import Confidence, Edit, Location
from torchdoctor.static import torchapi
from torchdoctor.static.bindings import Binding, BindingKind, attribute_bindings, scope_bindings
from torchdoctor.static.structure import (
    ClassScope,
    Frame,
    FrameKind,
    FunctionScope,
    ModuleScope,
)

__all__ = ["CURRENT", "FileContext", "Scope"]

Scope = FunctionScope | None  # None: module level


class _Current:
    """Default of every ``scope`` argument: the scope the traversal is in now."""

    def __repr__(self) -> str:
        return "CURRENT"


CURRENT = _Current()
# Lines with their ends, split the way ``ast`` counts lines (not on form feeds).
_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
ScopeArg = FunctionScope | None | _Current

# Methods that return their receiver (``model.to(device)`` is still the model).
_SELF_RETURNING = frozenset({
    "to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16",
    "requires_grad_", "share_memory", "apply", "type", "to_empty", "xpu", "mps",
})
# Wrappers whose result is (or behaves as) their first argument.
_TRANSPARENT_CALLS = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})
_MAX_DEPTH = 8


class FileContext:
    """Everything rules may ask about one file. Built by the engine, one per file.

    Attributes:
        path: the path as given by the user (used in every location).
        source: the decoded text.
        lines: the text split into lines (without line ends).
        tree: the parsed module.
        module: the file's structure (loops, functions, classes), filled by the traversal.
        imports: local name -> qualified name, from every import statement in the file.
        function: the function the traversal is in right now (``None`` at module level).
        frames: the blocks around the node the traversal is at right now.
    """

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path = path
        self.source = source
        self.lines = source.splitlines()
        self.tree = tree
        self.module = ModuleScope(tree, Frame(FrameKind.MODULE, tree))
        self.imports: dict[str, str] = {}
        self.function: FunctionScope | None = None
        self.frames: tuple[Frame, ...] = (self.module.frame,)
        self.scopes: dict[ast.AST, FunctionScope] = {}
        # name -> the last function (not method) / class of that name seen so far
        self.function_index: dict[str, FunctionScope] = {}
        self.class_index: dict[str, ClassScope] = {}
        self.classes: dict[ast.AST, ClassScope] = {}
        self._tables: dict[ast.AST, dict[str, list[Binding]]] = {}
        self._attributes: dict[ast.AST, dict[str, list[tuple[Binding, ast.AST]]]] = {}
        self._types: dict[tuple[int, int], str | None] = {}
        self._source_lines: list[str] | None = None
        self.memo: dict[object, object] = {}
        self._aliases: dict[tuple[int, int], str | None] = {}
        """Per-file cache rules and helpers may use (key by a tuple naming the owner)."""

    # --- names --------------------------------------------------------------------------

    def add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Record the names an import statement binds (called by the engine)."""
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = alias.name
                else:
                    root = alias.name.partition(".")[0]
                    self.imports[root] = root
            return
        if node.level or not node.module:
            return
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualified_name(self, expr: ast.AST, scope: ScopeArg = CURRENT, _depth: int = 0
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
        found = self.lookup(name, scope)
        if found is None:
            return None
        binding, owner = found
        if binding.kind is not BindingKind.ASSIGN or not isinstance(
                binding.value, (ast.Name, ast.Attribute)):
            return None
        return self.qualified_name(binding.value, owner, depth + 1)

    def is_call_to(self, call: ast.AST, *names: str, scope: ScopeArg = CURRENT) -> bool:
        """Whether ``call`` is a call of one of the qualified ``names`` (any spelling)."""
        if not isinstance(call, ast.Call):
            return False
        qualified = self.qualified_name(call.func, scope)
        return qualified is not None and qualified in {torchapi.canonical(n) for n in names}

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
            # In `x = f(x)` the `x` on the right is the previous binding, not this one.
            bindings = [b for b in self._table(owner).get(name.id, ())
                        if not _encloses(b, position)]
            if bindings:
                before = [b for b in bindings if b.position < position]
                return (before[-1] if before else bindings[0]), current
            if current is None:
                return None
            current = current.parent

    def attribute_binding(self, attr: ast.Attribute, scope: ScopeArg = CURRENT
                          ) -> tuple[Binding, Scope] | None:
        """What ``self.attr`` was bound to in the class of the current method, if anywhere."""
        method = self._scope(scope)
        if (method is None or method.owner is None or not isinstance(attr.value, ast.Name)
                or attr.value.id != method.self_name):
            return None
        table = self._attributes.get(method.owner.node)
        if table is None:
            table = self._attributes[method.owner.node] = attribute_bindings(method.owner.node)
        found = table.get(attr.attr)
        if not found:
            return None
        for binding, method_node in found:
            if binding.value is not None and not _is_none(binding.value):
                return binding, self.scopes.get(method_node)
        binding, method_node = found[0]
        return binding, self.scopes.get(method_node)

    def unpacked_source(self, name: str, binding: Binding, scope: Scope
                        ) -> tuple[ast.expr, Scope] | None:
        """Where a name unpacked from a call of a local function gets its value.

        ``model, loader = make()``, with ``make`` a function of this file whose last
        ``return`` of that length is ``return Net(), DataLoader(...)``, gives ``Net()`` (and
        ``make``'s scope) for ``model``. ``None`` for any other unpacking.
        """
        statement, value = binding.node, binding.value
        if binding.kind is not BindingKind.UNPACKED or not isinstance(value, ast.Call) or \
                not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
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
        for node in _returns(function.node):
            if isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == \
                    len(names) and not any(isinstance(e, ast.Starred) for e in node.value.elts):
                found = node.value.elts[names.index(name)]
        return None if found is None else (found, function)

    def _scope(self, scope: ScopeArg) -> Scope:
        return self.function if isinstance(scope, _Current) else scope

    def _table(self, owner: ast.AST) -> dict[str, list[Binding]]:
        table = self._tables.get(owner)
        if table is None:
            table = self._tables[owner] = scope_bindings(owner)
        return table

    # --- types --------------------------------------------------------------------------

    def instance_type(self, expr: ast.AST, scope: ScopeArg = CURRENT, _depth: int = 0
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
                return None if source is None else self.instance_type(source[0], source[1],
                                                                      depth)
            return None if found is None else self._infer_binding(found[0], found[1], depth)
        if isinstance(expr, ast.Attribute):
            found = self.attribute_binding(expr, scope)
            if found is not None:
                return self._infer_binding(found[0], found[1], depth)
        return None

    def _infer_call(self, call: ast.Call, scope: Scope, depth: int) -> str | None:
        func = call.func
        qualified = self.qualified_name(func, scope)
        if qualified in _TRANSPARENT_CALLS and call.args:
            return self.instance_type(call.args[0], scope, depth)
        if qualified is not None:
            return qualified
        if isinstance(func, ast.Name):
            local = self.local_class(func.id)
            if local is not None:
                return f"<local>.{local.name}"
        if isinstance(func, ast.Attribute) and func.attr in _SELF_RETURNING:
            return self.instance_type(func.value, scope, depth)
        return None

    def _infer_binding(self, binding: Binding, scope: Scope, depth: int) -> str | None:
        if binding.kind is BindingKind.PARAMETER or binding.annotation is not None:
            if binding.annotation is not None:
                return self.qualified_name(binding.annotation, scope) or self._local_name(
                    binding.annotation)
            return None
        if binding.kind in (BindingKind.ASSIGN, BindingKind.WITH_TARGET) and binding.value:
            return self.instance_type(binding.value, scope, depth)
        return None

    def _local_name(self, annotation: ast.expr) -> str | None:
        if isinstance(annotation, ast.Name) and self.local_class(annotation.id) is not None:
            return f"<local>.{annotation.id}"
        return None

    def local_class(self, name: str) -> ClassScope | None:
        """The class of this file called ``name`` (the last one defined), if any."""
        return self.class_index.get(name)

    def is_family(self, type_name: str, family: str, _seen: frozenset[str] = frozenset()
                  ) -> bool:
        """Whether the class ``type_name`` (from :meth:`instance_type`) is in ``family``."""
        if not type_name.startswith("<local>."):
            return torchapi.in_family(type_name, family)
        cls = self.local_class(type_name[len("<local>."):])
        if cls is None or type_name in _seen or len(_seen) > _MAX_DEPTH:
            return False
        for base in cls.node.bases:
            base_name = self.qualified_name(base) or self._local_name(base)
            if base_name and self.is_family(base_name, family, _seen | {type_name}):
                return True
        return False

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

    # --- scopes -------------------------------------------------------------------------

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
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and scope is not None and scope.owner is not None
                and func.value.id == scope.self_name):
            return scope.owner.methods.get(func.attr)
        return None

    # --- places and edits ---------------------------------------------------------------

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, ``""`` past the end."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def column(self, line: int, byte_offset: int) -> int:
        """Convert an ``ast`` column (UTF-8 bytes) to characters."""
        text = self.line_text(line)
        if text.isascii():
            return byte_offset
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))

    def location(self, node: ast.AST) -> Location:
        """The location of a node: path, line, column, end and the line's text."""
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None)
        end_offset = getattr(node, "end_col_offset", None)
        return Location(
            path=self.path,
            line=line,
            column=self.column(line, getattr(node, "col_offset", 0)),
            end_line=end_line,
            end_column=None if end_line is None or end_offset is None
            else self.column(end_line, end_offset),
            snippet=self.line_text(line),
        )

    def segment(self, node: ast.AST) -> str:
        """The source text of a node (``""`` when it has no position).

        Same result as ``ast.get_source_segment``, which splits the whole file on every
        call (quadratic when rules ask often on large files); the split is done once here.
        """
        positions = [getattr(node, name, None) for name in
                     ("lineno", "end_lineno", "col_offset", "end_col_offset")]
        if any(value is None for value in positions):
            return ""
        first, last, start, end = (int(value) for value in positions)  # type: ignore[arg-type]
        first, last = first - 1, last - 1
        lines = self._source_lines
        if lines is None:
            found: list[str] = _SOURCE_LINE.findall(self.source)
            lines = self._source_lines = found
        if not 0 <= first <= last < len(lines):
            return ""
        if first == last:
            return lines[first].encode()[start:end].decode(errors="replace")
        head = lines[first].encode()[start:].decode(errors="replace")
        tail = lines[last].encode()[:end].decode(errors="replace")
        return "".join([head, *lines[first + 1:last], tail])

    def replace(self, node: ast.AST, text: str) -> Edit:
        """An edit that replaces the node's text with ``text``."""
        loc = self.location(node)
        return Edit(loc.line or 1, loc.column or 0, loc.end_line or loc.line or 1,
                    loc.end_column if loc.end_column is not None else loc.column or 0, text)

    def insert_before_statement(self, statement: ast.stmt, text: str) -> Edit:
        """An edit that inserts ``text`` as a new line above ``statement``, same indent."""
        line = statement.lineno
        column = self.column(line, statement.col_offset)
        indent = self.line_text(line)[:column]
        return Edit(line, column, line, column, f"{text}\n{indent}")

    def delete_statement(self, statement: ast.AST) -> Edit | None:
        """An edit that removes a statement (or an expression statement's call) and its
        whole lines, when it has them to itself; ``None`` otherwise."""
        first = getattr(statement, "lineno", 1)
        last = getattr(statement, "end_lineno", None) or first
        start_col = self.column(first, getattr(statement, "col_offset", 0))
        end_col = self.column(last, getattr(statement, "end_col_offset", None) or 0)
        if self.line_text(first)[:start_col].strip():
            return None
        rest = self.line_text(last)[end_col:].strip()
        if rest and not rest.startswith("#"):
            return None
        return Edit(first, 0, last + 1, 0, "") if last < len(self.lines) else \
            Edit(first, 0, last, len(self.line_text(last)), "")


def _returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The ``return`` statements of a function, in source order, nested scopes excluded."""
    found: list[ast.Return] = []
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(reversed([c for c in ast.iter_child_nodes(node)
                                   if isinstance(c, ast.stmt)]))
    return found


def _encloses(binding: Binding, position: tuple[int, int]) -> bool:
    """Whether a use at ``position`` is inside the assignment that makes ``binding``."""
    if binding.kind not in (BindingKind.ASSIGN, BindingKind.UNPACKED):
        return False
    node = binding.node
    end = (getattr(node, "end_lineno", None) or 0, getattr(node, "end_col_offset", None) or 0)
    return binding.position <= position < end


def _is_none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def _hint_name(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None
