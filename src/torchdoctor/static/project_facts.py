"""What one parsed file contributes to the project index: plain, picklable facts.

:func:`summarise` reads a module's classes and functions (not every node: class and
function bodies only) and records, with every name already qualified through the file's
imports, what :mod:`torchdoctor.static.project` needs to answer questions across files.
Nothing here imports torch or the code it reads.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from torchdoctor.static import torchapi

__all__ = [
    "ClassFacts",
    "FunctionFacts",
    "ModuleFacts",
    "module_name",
    "only_picks_outputs",
    "summarise",
]

_Node = TypeVar("_Node", bound=ast.AST)
_Body = TypeVar("_Body")

# What a forward can end in: an activation function or layer (by qualified name) or a
# tensor method of the same name.
_ENDINGS: dict[str, str] = {
    **torchapi.ACTIVATION_FUNCTIONS,
    **torchapi.ACTIVATION_LAYERS,
    **{name: name for name in torchapi.ACTIVATION_METHODS},
}


class _Definition(Generic[_Node, _Body]):
    """A class or function of a file: its names and place, read when the file is
    summarised, and what its body says (:meth:`_read_body`), read from the tree on first
    use and the tree then let go. Most classes and functions of a project are never
    asked about (on torch's sources, reading every body was a tenth of the time of
    parsing). A pickled copy carries the answers, never the tree."""

    __slots__ = ("_body", "_source", "line", "name", "path", "qualname")

    def __init__(
        self, name: str, qualname: str, path: str, line: int, source: tuple[_Node, _Namer]
    ) -> None:
        self.name = name
        self.qualname = qualname
        self.path = path
        self.line = line
        self._source: tuple[_Node, _Namer] | None = source
        self._body: _Body | None = None

    def _read(self) -> _Body:
        body = self._body
        if body is None:
            assert self._source is not None
            body = self._body = self._read_body(*self._source)
            self._source = None  # the tree can go
        return body

    def _read_body(self, node: _Node, namer: _Namer) -> _Body:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, object]:
        self._read()
        return {
            slot: getattr(self, slot)
            for cls in type(self).__mro__
            for slot in getattr(cls, "__slots__", ())
        }

    def __setstate__(self, state: dict[str, object]) -> None:
        for slot, value in state.items():
            setattr(self, slot, value)


class ClassFacts(_Definition[ast.ClassDef, "_ClassBody"]):
    """One class as its file shows it.

    Its name, bases and method names are read when the file is summarised; what its body
    builds (``attributes``, ``constructs``, ``reads_training``, ``forward_ends_in``,
    ``sequential_last``) on the first question about them (see :class:`_Definition`).

    Attributes:
        name: the class's own name; ``qualname`` is ``module.Name``.
        bases: qualified names of the bases (a class of the same file as ``module.Name``).
        attributes: ``self.x = Ctor(...)`` in ``__init__``: ``x`` -> qualified ``Ctor``.
        constructs: qualified names of every call in the class's body (layers it builds,
            functions it calls), including methods other than ``__init__``.
        reads_training: the class branches on ``self.training``.
        forward_ends_in: ``"sigmoid"``, ``"softmax"``, ``"log_softmax"`` when every
            ``return`` of ``forward`` applies it last (``None`` otherwise or unknown);
            ``"<attr>"`` strings name a layer attribute to look up (``self.head(x)``).
        method_endings: the same for every method: ``name`` -> ending of what it returns,
            ``name[i]`` -> ending of item ``i`` of the tuple it returns; only the known.
        method_lines: the line of each method's ``def``.
        methods: the names of the methods it defines.
        sequential_last: ``self.x = nn.Sequential(..., Last())`` in ``__init__``: ``x`` ->
            what ``Last`` ends in (as ``forward_ends_in``).
    """

    __slots__ = ("bases", "methods")

    def __init__(
        self,
        name: str,
        qualname: str,
        path: str,
        line: int,
        bases: tuple[str, ...],
        methods: frozenset[str],
        source: tuple[ast.ClassDef, _Namer],
    ) -> None:
        super().__init__(name, qualname, path, line, source)
        self.bases = bases
        self.methods = methods

    def __repr__(self) -> str:
        return f"ClassFacts({self.qualname!r}, bases={self.bases!r})"

    def _read_body(self, node: ast.ClassDef, namer: _Namer) -> _ClassBody:
        return _class_body(node, namer)

    @property
    def body(self) -> _ClassBody:
        """What the class's body builds (read from the tree on first use)."""
        return self._read()

    @property
    def attributes(self) -> dict[str, str]:
        return self.body.attributes

    @property
    def constructs(self) -> frozenset[str]:
        return self.body.constructs

    @property
    def reads_training(self) -> bool:
        return self.body.reads_training

    @property
    def forward_ends_in(self) -> str | None:
        return self.body.method_endings.get("forward")

    @property
    def method_endings(self) -> dict[str, str]:
        return self.body.method_endings

    @property
    def method_lines(self) -> dict[str, int]:
        return self.body.method_lines

    @property
    def sequential_last(self) -> dict[str, str]:
        return self.body.sequential_last

    @property
    def init_calls(self) -> frozenset[str]:
        return self.body.init_calls

    @property
    def detached_arguments(self) -> dict[str, frozenset[int]]:
        return self.body.detached_arguments

    @property
    def evaluates_itself(self) -> bool:
        return self.body.evaluates_itself


@dataclass(slots=True)
class _ClassBody:
    """The facts of a class that take reading its whole body (see :class:`ClassFacts`)."""

    attributes: dict[str, str] = field(default_factory=dict)
    constructs: frozenset[str] = frozenset()
    reads_training: bool = False
    method_endings: dict[str, str] = field(default_factory=dict)
    method_lines: dict[str, int] = field(default_factory=dict)
    sequential_last: dict[str, str] = field(default_factory=dict)
    init_calls: frozenset[str] = frozenset()
    detached_arguments: dict[str, frozenset[int]] = field(default_factory=dict)
    evaluates_itself: bool = False


_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class FunctionFacts(_Definition[_FunctionNode, tuple[tuple[str, ...], frozenset[str]]]):
    """One module-level function: what it returns and calls (qualified names), read from
    its body on first use."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"FunctionFacts({self.qualname!r})"

    def _read_body(
        self, node: _FunctionNode, namer: _Namer
    ) -> tuple[tuple[str, ...], frozenset[str]]:
        return _function_body(node, namer)

    @property
    def returns(self) -> tuple[str, ...]:
        """What each ``return`` gives: a constructor's qualified name, ``"<call>"`` for
        another call, ``"<value>"`` for anything else."""
        return self._read()[0]

    @property
    def calls(self) -> frozenset[str]:
        """The qualified names of every call in the body."""
        return self._read()[1]


@dataclass(slots=True)
class ModuleFacts:
    """Everything :func:`summarise` found in one file."""

    name: str
    path: str
    imports: dict[str, str]
    classes: dict[str, ClassFacts]
    functions: dict[str, FunctionFacts]
    # A package's __init__.py that sets TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD: every module of
    # the package imports it first, so their torch.load calls unpickle without restriction.
    forces_full_unpickling: bool = False

    def complete(self) -> None:
        """Read every class and function body now, so that the facts hold no part of
        the syntax tree (for a tree that is about to be freed)."""
        for cls in self.classes.values():
            cls._read()
        for function in self.functions.values():
            function._read()


_PACKAGE_CACHE: dict[str, bool] = {}
FORCE_FULL_UNPICKLING = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


def module_name(path: str) -> str:
    """The dotted module name of a file: its stem, prefixed by the packages (folders with
    an ``__init__.py``) that contain it. ``"<string>"`` and the like keep their name."""
    if not path.endswith(".py"):
        return path
    directory, file_name = os.path.split(os.path.abspath(path))
    parts = [] if file_name == "__init__.py" else [file_name[:-3]]
    for _ in range(32):
        is_package = _PACKAGE_CACHE.get(directory)
        if is_package is None:
            is_package = _PACKAGE_CACHE[directory] = os.path.isfile(
                os.path.join(directory, "__init__.py")
            )
        if not is_package:
            break
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return ".".join(parts) or file_name[:-3]


def summarise(path: str, tree: ast.Module, name: str | None = None) -> ModuleFacts:
    """The facts of one parsed module (see :class:`ModuleFacts`)."""
    module = name or module_name(path)
    is_package = path.endswith("__init__.py")
    imports: dict[str, str] = {}
    classes: list[ast.ClassDef] = []
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _add_import(imports, node, module, is_package)
        elif isinstance(node, ast.ClassDef):
            classes.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            stack.extend(node.body)
            stack.extend(getattr(node, "orelse", ()))
            for handler in getattr(node, "handlers", ()):
                stack.extend(handler.body)
    local = {c.name for c in classes} | {f.name for f in functions}
    namer = _Namer(imports, local, module)
    facts = ModuleFacts(module, path, imports, {}, {})
    if is_package:
        facts.forces_full_unpickling = any(
            isinstance(node, ast.Constant) and node.value == FORCE_FULL_UNPICKLING
            for statement in tree.body
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for node in ast.walk(statement)
        )
    for cls in classes:
        facts.classes[cls.name] = _class_facts(cls, namer, path)
    for function in functions:
        facts.functions[function.name] = FunctionFacts(
            function.name, f"{module}.{function.name}", path, function.lineno, (function, namer)
        )
    return facts


def _add_import(
    imports: dict[str, str], node: ast.Import | ast.ImportFrom, module: str, is_package: bool
) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                imports[alias.asname] = alias.name
            else:
                root = alias.name.partition(".")[0]
                imports[root] = root
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        base = ".".join([*package, *([node.module] if node.module else [])])
    for alias in node.names:
        if alias.name != "*":
            imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name


class _Namer:
    """Qualified names through one file's imports (module-level, shallow)."""

    def __init__(self, imports: dict[str, str], local: set[str], module: str) -> None:
        self.imports = imports
        self.local = local
        self.module = module

    def name(self, expr: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        root = self.imports.get(expr.id)
        if root is None:
            if expr.id not in self.local:
                return None
            root = f"{self.module}.{expr.id}"
        return torchapi.canonical(".".join([root, *reversed(parts)]))


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of a body, nested blocks included, nested definitions excluded:
    statements only, never their expressions (cheap next to a full walk)."""
    out: list[ast.stmt] = []
    stack = list(reversed(body))
    blocks_of = _BLOCKS
    while stack:
        statement = stack.pop()
        cls = statement.__class__
        blocks = blocks_of.get(cls)
        if blocks is None:
            blocks = _blocks(cls)
        if blocks is _DEFINITION:
            continue
        out.append(statement)
        if blocks:
            body_fields, has_handlers, has_cases = blocks
            for block_name in body_fields:
                inner = getattr(statement, block_name, None)
                if inner:
                    stack.extend(reversed(inner))
            if has_handlers:
                for handler in statement.handlers:  # type: ignore[attr-defined]
                    stack.extend(reversed(handler.body))
            if has_cases:
                for case in statement.cases:  # type: ignore[attr-defined]
                    stack.extend(reversed(case.body))
    return out


# Per statement class, where :func:`_statements` finds nested statements: the block
# fields among body/orelse/finalbody, whether it has except handlers, match cases; ``()``
# for none; :data:`_DEFINITION` for a nested definition (skipped with its body).
_DEFINITION: tuple[tuple[str, ...], bool, bool] = ((), False, False)
_BLOCKS: dict[type, tuple[tuple[str, ...], bool, bool] | tuple[()]] = {
    ast.FunctionDef: _DEFINITION,
    ast.AsyncFunctionDef: _DEFINITION,
    ast.ClassDef: _DEFINITION,
}


def _blocks(cls: type) -> tuple[tuple[str, ...], bool, bool] | tuple[()]:
    fields = getattr(cls, "_fields", ())
    body_fields = tuple(f for f in ("body", "orelse", "finalbody") if f in fields)
    found = (body_fields, "handlers" in fields, "cases" in fields)
    _BLOCKS[cls] = found if any(found) else ()
    return _BLOCKS[cls]


# Methods that collect layers built in their arguments: layers.append(nn.BatchNorm2d(c)).
_COLLECTING = frozenset({"append", "extend", "insert", "add_module", "register_module"})


def _calls(expr: ast.AST | None, namer: _Namer, out: set[str], depth: int = 0) -> bool:
    """Add the qualified callees of ``expr`` (a call, its arguments, lists of calls) to
    ``out``; returns whether it reads ``.training``. Nested only a few levels deep."""
    if expr is None or depth > 4:
        return False
    cls = expr.__class__
    if cls is ast.Call:
        call: ast.Call = expr  # type: ignore[assignment]
        called = namer.name(call.func)
        training = False
        func = call.func
        if func.__class__ is ast.Attribute and func.value.__class__ is ast.Call:
            training = _calls(func.value, namer, out, depth + 1)  # nn.Sequential(...).to(d)
        if called is None and not (func.__class__ is ast.Attribute and func.attr in _COLLECTING):
            # self.block(x), x.view(...): not a layer being built; only a mode flag passed
            # on (`training=self.training`, `self.block(x, self.training)`) matters among
            # its arguments.
            for value in (*call.args, *(keyword.value for keyword in call.keywords)):
                if value.__class__ is ast.Attribute and value.attr == "training":
                    training = True
            return training
        if called is not None:
            if torchapi.without_dropout(called, call):  # nn.LSTM(...) without dropout
                out.add(called + torchapi.NO_DROPOUT)
            elif torchapi.train_mode_exact(called, call):  # tracked InstanceNorm
                out.add(called + torchapi.TRAIN_MODE_EXACT)
            else:
                out.add(called)
        for argument in call.args:
            training = _calls(argument, namer, out, depth + 1) or training
        for keyword in call.keywords:
            training = _calls(keyword.value, namer, out, depth + 1) or training
        return training
    if cls is ast.Attribute:
        return bool(expr.attr == "training")  # type: ignore[attr-defined]
    if cls in _NESTED:
        training = False
        for field in _NESTED[cls]:
            value = getattr(expr, field)
            for child in value if value.__class__ is list else (value,):
                training = _calls(child, namer, out, depth + 1) or training
        return training
    return False


# The fields of the containers :func:`_calls` looks into that can hold a call or a
# ``.training`` read; the others (operators, contexts, comprehension clauses) never do.
_NESTED: dict[type, tuple[str, ...]] = {
    ast.List: ("elts",),
    ast.Tuple: ("elts",),
    ast.Starred: ("value",),
    ast.BinOp: ("left", "right"),
    ast.BoolOp: ("values",),
    ast.UnaryOp: ("operand",),
    ast.IfExp: ("test", "body", "orelse"),
    ast.Compare: ("left", "comparators"),
    ast.ListComp: ("elt",),
    ast.GeneratorExp: ("elt",),
}


def _statement_calls(statement: ast.stmt, namer: _Namer, out: set[str]) -> bool:
    training = False
    cls = statement.__class__
    parts = _PARTS.get(cls)
    if parts is None:
        fields = getattr(cls, "_fields", ())
        parts = _PARTS[cls] = tuple(p for p in ("value", "test", "iter", "items") if p in fields)
    for part in parts:
        value = getattr(statement, part, None)
        if isinstance(value, list):
            for item in value:
                training = _calls(getattr(item, "context_expr", None), namer, out) or training
        elif isinstance(value, ast.AST):
            training = _calls(value, namer, out) or training
    return training


# Per statement class, which of value/test/iter/items it has (read by _statement_calls).
_PARTS: dict[type, tuple[str, ...]] = {}


def only_picks_outputs(statement: ast.stmt, function: ast.AST) -> bool:
    """``statement`` is an ``if self.training:`` (or ``if not self.training:``) of
    ``function`` whose branches only return values already computed: names, attributes,
    constant indexes, and tuples and lists of them. SfmLearner's pose network returns
    every scale's mask in training and one otherwise: the mode picks which outputs come
    back and changes none of their values. A branch with no ``else`` counts when the
    statement right after the ``if`` is such a return."""
    if not isinstance(statement, ast.If):
        return False
    test = statement.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if not (isinstance(test, ast.Attribute) and test.attr == "training"):
        return False
    if not _plain_return(statement.body):
        return False
    orelse = statement.orelse
    if orelse:
        return _plain_return(orelse)
    for node in ast.walk(function):
        for part in ("body", "orelse", "finalbody"):
            block = getattr(node, part, None)
            if isinstance(block, list) and statement in block:
                following = block[block.index(statement) + 1 :]
                return _plain_return(following[:1])
    return False


def _plain_return(block: list[ast.stmt]) -> bool:
    return (
        len(block) == 1
        and isinstance(block[0], ast.Return)
        and block[0].value is not None
        and _plain_value(block[0].value)
    )


def _plain_value(value: ast.expr) -> bool:
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(_plain_value(e) for e in value.elts)
    # `self.out`, `masks[0]`: a value already made, reached without computing
    while isinstance(value, ast.Attribute) or (
        isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant)
    ):
        value = value.value
    return isinstance(value, (ast.Name, ast.Constant))


def _class_facts(cls: ast.ClassDef, namer: _Namer, path: str) -> ClassFacts:
    # A base the file does not show (a name never imported, a call) stays unknown: "?".
    bases = tuple(namer.name(base) or f"?{getattr(base, 'id', '')}" for base in cls.bases)
    methods = frozenset(
        s.name for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    )
    return ClassFacts(
        cls.name, f"{namer.module}.{cls.name}", path, cls.lineno, bases, methods, (cls, namer)
    )


def _class_body(cls: ast.ClassDef, namer: _Namer) -> _ClassBody:
    constructs: set[str] = set()
    reads_training = False
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    bodies: dict[str, list[ast.stmt]] = {}
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            methods[statement.name] = statement  # the last definition of a name wins
            bodies[statement.name] = _statements(statement.body)
            for inner in bodies[statement.name]:
                reads = _statement_calls(inner, namer, constructs)
                if reads and not only_picks_outputs(inner, statement):
                    reads_training = True
        elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)):
            reads_training = _statement_calls(statement, namer, constructs) or reads_training
    endings: dict[str, str] = {}
    for name, method in methods.items():
        for item, ending in _returned_endings(method, bodies[name], namer).items():
            endings[name if item is None else f"{name}[{item}]"] = ending
    facts = _ClassBody(
        constructs=frozenset(constructs),
        reads_training=reads_training,
        method_endings=endings,
        method_lines={name: method.lineno for name, method in methods.items()},
    )
    facts.detached_arguments = {
        name: _detached_arguments(method) for name, method in methods.items()
    }
    init = methods.get("__init__")
    if init is not None:
        _init_attributes(init, namer, facts)
        facts.init_calls = _init_calls(init, namer)
        facts.evaluates_itself = _init_evaluates(init) and not any(
            _trains_itself(method) for name, method in methods.items() if name != "__init__"
        )
    return facts


def _own_mode_call(node: ast.AST, self_name: str) -> str | None:
    """``"eval"`` for ``self.eval()``/``self.train(False)``, ``"train"`` for
    ``self.train()``/``self.train(True)``, else ``None``."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == self_name
        and node.func.attr in ("eval", "train")
    ):
        return None
    if node.func.attr == "eval":
        return "eval"
    given = node.args[0] if node.args else next((k.value for k in node.keywords), None)
    off = isinstance(given, ast.Constant) and not given.value
    return "eval" if off else "train"


def _init_evaluates(init: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``__init__`` ends its building with ``self.eval()`` (a frozen model: a pretrained
    autoencoder, a perceptual network): a statement of its own body, with no attribute
    of ``self`` assigned after it (a layer built later starts in training mode)."""
    self_name = init.args.args[0].arg if init.args.args else "self"
    evaluated = False
    for statement in init.body:
        mode = (
            _own_mode_call(statement.value, self_name) if isinstance(statement, ast.Expr) else None
        )
        if mode is not None:
            evaluated = mode == "eval"
        elif any(
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == self_name
            for node in ast.walk(statement)
        ):
            evaluated = False
    return evaluated


def _trains_itself(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the method calls ``self.train()``."""
    self_name = method.args.args[0].arg if method.args.args else "self"
    return any(_own_mode_call(node, self_name) == "train" for node in ast.walk(method))


# Calls whose result cannot be a module: builtins and methods of plain values.
_PLAIN_BUILTINS = frozenset(dir(builtins))
_PLAIN_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "format",
        "split",
        "join",
        "items",
        "keys",
        "values",
        "get",
        "update",
        "lower",
        "upper",
        "strip",
        "replace",
        "startswith",
        "endswith",
    }
)
# Tensor methods that read or reshape a value, or move it: whatever they are called on,
# they build no module (one they are chained onto is walked, and named, by itself).
_VALUE_METHODS = frozenset(
    {
        "size",
        "sum",
        "long",
        "int",
        "float",
        "bool",
        "item",
        "repeat",
        "repeat_interleave",
        "view",
        "reshape",
        "unsqueeze",
        "squeeze",
        "expand",
        "permute",
        "transpose",
        "contiguous",
        "clone",
        "flatten",
        "numel",
        "nonzero",
        "cumsum",
        "tolist",
    }
)
UNKNOWN_CALL = "<call>"


# Reading a tensor through these keeps no autograd graph.
_DETACHING = frozenset({"data", "item", "detach", "tolist", "numpy"})


def _detached_arguments(method: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """Positions (``self`` not counted) of the arguments the method only ever reads
    through ``.data``, ``.item()``, ``.detach()`` (or rebinds, in its own body, to such a
    read, ``v = v.data.sum()``, and uses freely after): what it keeps holds no graph."""
    names = [a.arg for a in method.args.args[1:]]
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(method):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    detached: set[int] = set()
    for position, name in enumerate(names):
        since = _detached_from(method, name, parents)
        if since is None:
            continue
        uses = [
            n
            for n in ast.walk(method)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        if uses and all(n.lineno > since or _read_detached(n, parents) for n in uses):
            detached.add(position)
    return frozenset(detached)


def _detached_from(
    method: ast.FunctionDef | ast.AsyncFunctionDef, name: str, parents: dict[int, ast.AST]
) -> int | None:
    """The line from which ``name`` holds a detached value: the end of the function when
    it is never rebound, the line of its one rebinding (a statement of the method's own
    body whose value reads only ``name``, detached); ``None`` for any other rebinding."""
    stores = [
        n
        for n in ast.walk(method)
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
    ]
    if not stores:
        return sys.maxsize
    if len(stores) > 1:
        return None
    statement = parents.get(id(stores[0]))
    if not (
        isinstance(statement, ast.Assign)
        and statement in method.body
        and len(statement.targets) == 1
        and all(
            n.id == name and _read_detached(n, parents)
            for n in ast.walk(statement.value)
            if isinstance(n, ast.Name)
        )
    ):
        return None
    return statement.lineno


def _read_detached(use: ast.Name, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(use))
    return isinstance(parent, ast.Attribute) and parent.attr in _DETACHING


def _plain_call(func: ast.expr) -> bool:
    """A builtin, ``super().__init__`` or a method of a plain value (``str.format``,
    ``mask.sum().item()``)."""
    if isinstance(func, ast.Name):
        return func.id in _PLAIN_BUILTINS
    return isinstance(func, ast.Attribute) and (
        func.attr in _PLAIN_METHODS
        or func.attr in _VALUE_METHODS
        or (
            isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
        )
    )


def _init_calls(init: ast.FunctionDef | ast.AsyncFunctionDef, namer: _Namer) -> frozenset[str]:
    """What ``__init__`` calls, by qualified name: builtins, ``super().__init__`` and
    methods of plain values left out; a call that could build a module and cannot be
    named (``self._make_layer()``, ``cfg.build()``) is ``"<call>"``."""
    found: set[str] = set()
    for statement in _statements(init.body):
        for node in ast.walk(statement):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = namer.name(func)
            if called is not None:
                found.add(called)
            elif not _plain_call(func):
                found.add(UNKNOWN_CALL)
    return frozenset(found)


def _init_attributes(
    init: ast.FunctionDef | ast.AsyncFunctionDef, namer: _Namer, facts: _ClassBody
) -> None:
    self_name = init.args.args[0].arg if init.args.args else "self"
    for node in _statements(init.body):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        for target in node.targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            ):
                called = namer.name(node.value.func)
                if called is not None:
                    facts.attributes[target.attr] = called
                    if called == "torch.nn.Sequential" and node.value.args:
                        last = node.value.args[-1]
                        ending = (
                            _ending_of_call(last, namer) if isinstance(last, ast.Call) else None
                        )
                        if ending:
                            facts.sequential_last[target.attr] = ending


def _returned_endings(
    function: ast.FunctionDef | ast.AsyncFunctionDef, statements: list[ast.stmt], namer: _Namer
) -> dict[int | None, str]:
    """What every ``return`` of a function applies last, when they all agree: key
    ``None`` for the value returned, ``i`` for item ``i`` of a returned tuple.

    Only returns of the function's own body are read (one nested in a branch may give the
    raw scores); a name is followed to its assignment in that body, unless the function
    also binds it elsewhere. ``statements`` is :func:`_statements` of the body."""
    top = [s for s in function.body if s.__class__ is ast.Return]
    if not top or len(top) != sum(1 for s in statements if s.__class__ is ast.Return):
        return {}
    if any(s.value is None for s in top):
        return {}
    simple = {id(s) for s in function.body if _assigns_one_name(s)}
    rebound = {node.id for s in statements if id(s) not in simple for node in _stored_names(s)}
    assigned: dict[str, ast.expr] = {}
    shapes: list[tuple[str | None, ...] | str | None] = []
    for statement in function.body:
        if isinstance(statement, ast.Assign) and id(statement) in simple:
            name = statement.targets[0].id  # type: ignore[attr-defined]
            if name not in rebound:
                assigned[name] = statement.value
        elif isinstance(statement, ast.Return) and statement.value is not None:
            value = _followed(statement.value, assigned, namer)
            if isinstance(value, (ast.Tuple, ast.List)):
                shapes.append(
                    tuple(
                        _ending_of_value(_followed(e, assigned, namer), namer) for e in value.elts
                    )
                )
            else:
                shapes.append(_ending_of_value(value, namer))
    first = shapes[0]
    if isinstance(first, tuple):
        if not all(isinstance(s, tuple) and len(s) == len(first) for s in shapes):
            return {}
        found: dict[int | None, str] = {}
        for item in range(len(first)):
            kinds = {s[item] for s in shapes}  # type: ignore[index]
            ending = kinds.pop() if len(kinds) == 1 else None
            if ending is not None:
                found[item] = ending
        return found
    if first is None or any(s != first for s in shapes):
        return {}
    return {None: first}


def _assigns_one_name(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    )


def _stored_names(statement: ast.stmt) -> list[ast.Name]:
    """The names a statement binds itself (its targets, not those of nested blocks)."""
    if isinstance(statement, ast.Assign):
        targets: list[ast.expr] = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in statement.items if i.optional_vars is not None]
    else:
        return []
    return [node for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)]


def _followed(value: ast.expr, assigned: dict[str, ast.expr], namer: _Namer) -> ast.expr:
    """``value`` followed to what gives its meaning: a name to its assignment, a
    shape-keeping method (``x.sigmoid().squeeze(-1)``) to the tensor it is called on."""
    for _ in range(4):
        if isinstance(value, ast.Name) and value.id in assigned:
            value = assigned[value.id]
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in torchapi.MEANING_KEEPING_METHODS
            and namer.name(value.func) is None
        ):
            value = value.func.value
        else:
            break
    return value


def _ending_of_value(value: ast.expr, namer: _Namer) -> str | None:
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    ):
        return f"<attr>{func.attr}"
    return _ending_of_call(value, namer)


def _ending_of_call(call: ast.Call, namer: _Namer) -> str | None:
    qualified = namer.name(call.func)
    if qualified is not None:
        return _ENDINGS.get(qualified)
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in torchapi.ACTIVATION_METHODS:
        return _ENDINGS[func.attr]  # x.sigmoid(), x.softmax(dim=-1): a tensor method
    return None


def _function_body(
    function: ast.FunctionDef | ast.AsyncFunctionDef, namer: _Namer
) -> tuple[tuple[str, ...], frozenset[str]]:
    calls: set[str] = set()
    returns: list[str] = []
    assigned: dict[str, str] = {}
    return_nodes: list[ast.Return] = []
    for statement in _statements(function.body):
        _statement_calls(statement, namer, calls)
        if isinstance(statement, ast.Return):
            return_nodes.append(statement)
        elif (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Call)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            called = namer.name(statement.value.func)
            if called is not None:
                assigned[statement.targets[0].id] = called
    for ret in return_nodes:
        value = ret.value
        if isinstance(value, ast.Call):
            returns.append(namer.name(value.func) or "<call>")
        elif isinstance(value, ast.Name) and value.id in assigned:
            returns.append(assigned[value.id])
        elif value is not None:
            returns.append("<value>")
    return tuple(returns), frozenset(calls)
