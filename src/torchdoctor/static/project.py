"""The project index: what every linted file defines, for questions across files.

``lint`` over a folder parses every file once, and from each parsed tree takes the
facts of :mod:`torchdoctor.static.project_facts` (classes, their bases, what ``__init__``
assigns to ``self``, what ``forward`` ends in, module-level functions and what they return
and call). The index joins them, so that a rule looking at ``train.py`` can ask about the
model class defined in ``models/net.py``. Nothing is imported: the index only reads the
syntax trees lint parses anyway.

How a rule gets it
------------------
``self.ctx.project`` is the :class:`ProjectIndex` of the run (for ``lint_source`` and for
a single file, the index of that one file). The usual entry point is the context::

    info = self.ctx.project_class_of(model_expr)   # ClassInfo | None, through bindings
    if info is not None and info.has_dropout_or_batchnorm:
        ...

Query API
---------
* ``project.module_class(name, near=path) -> ClassInfo | None``: a class by qualified
  name (``"models.net.Net"``, ``"<local>.Net"`` for the asking file with ``near=``), or by
  bare name when exactly one class of the project has it. ``near`` picks, among modules of
  the same name (many example folders have a ``model.py``), the one closest to ``path``.
* ``project.function(qualname, near=path) -> FunctionInfo | None``: a module-level
  function; ``FunctionInfo.returns`` (qualified names of what it returns: constructor
  calls, or ``"<call>"``), ``FunctionInfo.calls``.
* ``ClassInfo``: ``name``, ``qualname``, ``path``, ``line``, ``bases``, ``attributes``
  (``self.x = Ctor(...)`` in ``__init__``: ``x`` -> qualified ``Ctor``), ``methods``; and
  transitive answers (through project base classes and the project classes it builds):

  - ``is_module -> bool | None``: an ``nn.Module`` subclass (``None``: a base from
    outside the project and outside torch, so unknown);
  - ``has_dropout_or_batchnorm -> bool | None``: builds dropout, batch/instance norm, a
    layer with built-in dropout (RNNs, transformers, attention) or reads
    ``self.training``; ``False`` only when everything it builds is known;
  - ``forward_ends_in -> "sigmoid" | "softmax" | "log_softmax" | None``: the last
    operation of every ``return`` of ``forward`` (``torch.sigmoid(x)``, ``x.softmax(-1)``,
    a ``self.head`` that is ``nn.Sigmoid()`` or a ``Sequential`` ending in one, or a
    project class whose own forward ends so); inherited ``forward`` followed;
  - ``method_ends_in(method, item=None)``: the same for any method, or for item ``item``
    of the tuple it returns; ``None`` when a project subclass overrides the method;
    ``method_site(method)``: the file and line of the ``def`` it runs;
    ``overridden(method)``: whether a project class deriving from this one defines it;
  - ``subclasses(qualified_base) -> bool``: whether any base, transitively, is it.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from torchdoctor.static import torchapi
from torchdoctor.static.project_facts import ClassFacts, FunctionFacts, ModuleFacts, summarise

T = TypeVar("T")

__all__ = [
    "ClassInfo",
    "FunctionInfo",
    "PLAIN_BASES",
    "ProjectIndex",
    "single_file_index",
]

_MAX_DEPTH = 12
# Libraries whose functions never build a module (numbers for a layer's arguments).
_PLAIN_ROOTS = ("math.", "numpy.", "np.", "operator.")
_MODULE_BASES = (
    "torch.nn.",
    "lightning.pytorch.LightningModule",
    "pytorch_lightning.LightningModule",
    "lightning.LightningModule",
    "pl.LightningModule",
)
# Bases that define none of the methods a project class is asked about: a method the
# class lacks is looked up past them, in its other bases.
PLAIN_BASES = frozenset({"object", "builtins.object", torchapi.MODULE, *_MODULE_BASES[1:]})


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """A module-level function of the project (see :class:`FunctionFacts`)."""

    name: str
    qualname: str
    path: str
    line: int
    returns: tuple[str, ...]
    calls: frozenset[str]


class ClassInfo:
    """A class of the project, with answers that follow the whole project."""

    __slots__ = ("_facts", "_project")

    def __init__(self, facts: ClassFacts, project: ProjectIndex) -> None:
        self._facts = facts
        self._project = project

    def __repr__(self) -> str:
        return f"ClassInfo({self.qualname!r})"

    name = property(lambda self: self._facts.name)
    qualname = property(lambda self: self._facts.qualname)
    path = property(lambda self: self._facts.path)
    line = property(lambda self: self._facts.line)
    bases = property(lambda self: self._facts.bases)
    attributes = property(lambda self: dict(self._facts.attributes))
    methods = property(lambda self: self._facts.methods)

    @property
    def is_module(self) -> bool | None:
        """Whether the class is an ``nn.Module`` (``None`` when it cannot be told)."""
        return self._project._is_module(self._facts, 0)

    @property
    def has_dropout_or_batchnorm(self) -> bool | None:
        """Whether the class behaves differently in train and eval mode (``None``:
        it builds something from outside the project that cannot be judged)."""
        return self._project._sensitive(self._facts, 0)

    @property
    def wrong_in_train_mode(self) -> bool | None:
        """As :attr:`has_dropout_or_batchnorm`, for the layers whose training-mode output
        is wrong to evaluate with (dropout, batch statistics): an instance norm that
        tracks running statistics changes in eval() but is exact in training mode."""
        return self._project._sensitive(self._facts, 0, evaluating=True)

    @property
    def evaluates_itself(self) -> bool:
        """Whether a new instance is in eval mode: the class's own ``__init__`` calls
        ``self.eval()`` after building its layers, and no method of it calls
        ``self.train()``."""
        return self._facts.evaluates_itself

    def keeps_detached(self, method: str, position: int) -> bool:
        """Whether ``method`` (of this class) reads its argument at ``position``
        (``self`` not counted) only through ``.data``/``.item()``/``.detach()``."""
        return position in self._facts.detached_arguments.get(method, frozenset())

    @property
    def holds_no_parameters(self) -> bool:
        """Whether the class provably holds no parameters or buffers: an ``nn.Module``
        whose ``__init__`` builds only parameter-free layers (pooling, activations) or
        project classes of the same kind, or nothing; ``False`` when it cannot be told."""
        return self._project._parameter_free(self._facts, 0)

    @property
    def forward_ends_in(self) -> str | None:
        """``"sigmoid"``, ``"softmax"`` or ``"log_softmax"`` when ``forward`` always
        ends in it; ``None`` otherwise or when it cannot be told."""
        return self._project._ending(self._facts, "forward", 0)

    def method_site(self, method: str) -> tuple[str, int] | None:
        """Where the method runs from: the file and line of its ``def`` in the class or
        the project base it inherits it from; ``None`` when none of them defines it."""
        definer = self._project._definer(self._facts, method, 0)
        if definer is None:
            return None
        return definer.path, definer.method_lines.get(method, definer.line)

    def overridden(self, method: str) -> bool:
        """Whether a class of the project deriving from this one defines ``method``."""
        return self._project._overridden(self._facts, method)

    def method_ends_in(self, method: str, item: int | None = None) -> str | None:
        """As :attr:`forward_ends_in`, for any method (its own or inherited from a project
        base): what every ``return`` of it applies last, or with ``item``, what item
        ``item`` of the tuple it returns does. ``None`` also when a class of the project
        that derives from this one overrides the method (the instance may be one)."""
        if self._project._overridden(self._facts, method):
            return None
        key = method if item is None else f"{method}[{item}]"
        return self._project._ending(self._facts, key, 0)

    def subclasses(self, base: str) -> bool:
        """Whether ``base`` (a qualified name) is among the class's bases, transitively."""
        return self._project._inherits(self._facts, base, 0)


class ProjectIndex:
    """Classes and functions of every linted file, by module (see the module docstring)."""

    def __init__(self, modules: Iterable[ModuleFacts] = ()) -> None:
        self._modules: dict[str, list[ModuleFacts]] = {}
        self._by_name: dict[str, list[ClassFacts]] = {}
        self._paths: dict[str, ModuleFacts] = {}
        self._memo: dict[tuple[str, str], object] = {}
        for facts in modules:
            self.add(facts)

    def add(self, facts: ModuleFacts) -> None:
        """Add one file's facts (a file added twice replaces its earlier facts)."""
        self._modules.setdefault(facts.name, []).append(facts)
        self._paths[os.path.abspath(facts.path)] = facts
        for cls in facts.classes.values():
            self._by_name.setdefault(cls.name, []).append(cls)
        self._memo.clear()

    def __len__(self) -> int:
        return len(self._paths)

    def paths(self) -> list[str]:
        """The absolute path of every file of the project."""
        return list(self._paths)

    def remember(self, key: str, compute: Callable[[], T]) -> T:
        """A project-wide answer, computed once (until a file is added)."""
        memo_key = ("project", key)
        if memo_key not in self._memo:
            self._memo[memo_key] = compute()
        return self._memo[memo_key]  # type: ignore[return-value]

    def classes(self) -> Iterator[ClassInfo]:
        """Every class of the project, in no particular order."""
        for found in self._by_name.values():
            for facts in found:
                yield ClassInfo(facts, self)

    def facts_for(self, path: str) -> ModuleFacts | None:
        """The facts recorded for the file at ``path``."""
        return self._paths.get(os.path.abspath(path))

    # --- lookups ------------------------------------------------------------------------

    def module_class(self, name: str, near: str | None = None) -> ClassInfo | None:
        """A class by qualified name, ``<local>.Name`` (with ``near``) or unique bare name."""
        facts = self._class_facts(name, near)
        return None if facts is None else ClassInfo(facts, self)

    def function(self, qualname: str, near: str | None = None) -> FunctionInfo | None:
        """A module-level function by qualified name (``"train.make_model"``)."""
        module, _, name = qualname.rpartition(".")
        owner = self._module(module, near)
        found = None if owner is None else owner.functions.get(name)
        if found is None:
            return None
        return FunctionInfo(
            found.name, found.qualname, found.path, found.line, found.returns, found.calls
        )

    def _class_facts(self, name: str, near: str | None) -> ClassFacts | None:
        if name.startswith("<local>."):
            own = self.facts_for(near) if near else None
            return None if own is None else own.classes.get(name[len("<local>.") :])
        module, _, bare = name.rpartition(".")
        if module:
            owner = self._module(module, near)
            if owner is not None:
                found = owner.classes.get(bare)
                if found is not None:
                    return found
                target = owner.imports.get(bare)  # re-exported: from .net import Net
                if target is not None and target != name:
                    key = ("reexport", target)
                    if key not in self._memo:
                        self._memo[key] = None
                        self._memo[key] = self._class_facts(target, owner.path)
                    return self._memo[key]  # type: ignore[return-value]
            return None
        candidates = self._by_name.get(bare, [])
        return candidates[0] if len(candidates) == 1 else None

    def _module(self, name: str, near: str | None) -> ModuleFacts | None:
        candidates = self._modules.get(name) or self._namespace_modules(name)
        if not candidates:
            return None
        if len(candidates) == 1 or near is None:
            return candidates[0]
        here = os.path.dirname(os.path.abspath(near))
        return max(
            candidates,
            key=lambda m: len(os.path.commonpath([here, os.path.dirname(os.path.abspath(m.path))])),
        )

    def _namespace_modules(self, name: str) -> list[ModuleFacts]:
        """Modules a dotted name reaches through folders without ``__init__.py`` (implicit
        namespace packages, common in research code: ``from sgan.models import ...`` with
        ``sgan/models.py`` known as ``models``): the files named by the last part whose
        path ends with the name's folders."""
        package, _, last = name.rpartition(".")
        if not package:
            return []
        tail = os.sep + os.path.join(*name.split(".")) + ".py"
        return [m for m in self._modules.get(last, ()) if os.path.abspath(m.path).endswith(tail)]

    # --- transitive answers (memoised per class) ----------------------------------------

    def _cached(self, kind: str, facts: ClassFacts, compute: object) -> object:
        key = (kind, f"{facts.path}:{facts.qualname}")
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # cycle guard: a class that reaches itself adds nothing
        value = compute() if callable(compute) else compute
        self._memo[key] = value
        return value

    def _base_facts(self, facts: ClassFacts) -> list[ClassFacts | str]:
        out: list[ClassFacts | str] = []
        for base in facts.bases:
            found = self._class_facts(base, facts.path)
            out.append(found if found is not None else base)
        return out

    def _is_module(self, facts: ClassFacts, depth: int) -> bool | None:
        def compute() -> bool | None:
            unknown = False
            for base in self._base_facts(facts):
                if isinstance(base, str):
                    if base.startswith(_MODULE_BASES):
                        return True
                    # `class Trainer(object)`: the bare name reads "?object"
                    known = base in ("object", "?object") or base.startswith(("torch.", "builtins"))
                    unknown = unknown or not known
                elif depth < _MAX_DEPTH:
                    answer = self._is_module(base, depth + 1)
                    if answer:
                        return True
                    unknown = unknown or answer is None
            return None if unknown else False

        return self._cached("module", facts, compute)  # type: ignore[return-value]

    def _parameter_free(self, facts: ClassFacts, depth: int) -> bool:
        def compute() -> bool:
            if depth >= _MAX_DEPTH or "torch.nn.Parameter" in facts.constructs:
                return False
            for base in self._base_facts(facts):
                if isinstance(base, str):
                    if base != torchapi.MODULE:
                        return False
                elif not self._parameter_free(base, depth + 1):
                    return False
            return all(self._builds_no_parameters(c, facts.path, depth) for c in facts.init_calls)

        return self._cached("parameter-free", facts, compute)  # type: ignore[return-value]

    def _builds_no_parameters(self, called: str, near: str, depth: int) -> bool:
        """Whether a call of ``__init__`` adds no parameter or buffer to the module (or
        only the constant buffers of a torchaudio feature transform)."""
        if torchapi.holds_no_parameters(called):
            return True
        if called.startswith("torch."):
            if called == "torch.nn.Parameter" or called.startswith("torch.nn.parameter"):
                return False
            if torchapi.in_family(called, torchapi.MODULE):
                return torchapi.holds_no_parameters(called)
            return not called.startswith("torch.nn.")  # tensor maths: nothing registered
        if called.startswith(_PLAIN_ROOTS):
            return True
        found = self._class_facts(called, near)
        if found is None and depth < _MAX_DEPTH:
            # A function of the project (``self.window = create_window(11, 1)``): what
            # every one of its returns builds, when each is a known constructor.
            function = self.function(called, near)
            return bool(
                function is not None
                and function.returns
                and all(
                    not r.startswith("<") and self._builds_no_parameters(r, near, depth + 1)
                    for r in function.returns
                )
            )
        return bool(
            found is not None
            and self._is_module(found, depth + 1)
            and self._parameter_free(found, depth + 1)
        )

    def _inherits(self, facts: ClassFacts, wanted: str, depth: int) -> bool:
        for base in self._base_facts(facts):
            if isinstance(base, str):
                if base == wanted:
                    return True
            elif base.qualname == wanted or (
                depth < _MAX_DEPTH and self._inherits(base, wanted, depth + 1)
            ):
                return True
        return False

    def _sensitive(self, facts: ClassFacts, depth: int, evaluating: bool = False) -> bool | None:
        """Whether the class has a mode-dependent layer (``evaluating``: one whose
        training-mode output is wrong to evaluate with)."""

        def compute() -> bool | None:
            if facts.reads_training:
                return True
            unknown = False
            for base in self._base_facts(facts):
                answer = (
                    _name_sensitive(base, evaluating)
                    if isinstance(base, str)
                    else (
                        self._sensitive(base, depth + 1, evaluating) if depth < _MAX_DEPTH else None
                    )
                )
                if answer:
                    return True
                unknown = unknown or answer is None
            for called in facts.constructs:
                if self._own_method(facts, called):
                    continue  # `Module._check_checkpoint(...)`: its calls are counted here
                answer = self._call_sensitive(called, facts.path, depth, evaluating)
                if answer:
                    return True
                unknown = unknown or answer is None
            return None if unknown else False

        kind = "sensitive-evaluating" if evaluating else "sensitive"
        return self._cached(kind, facts, compute)  # type: ignore[return-value]

    def _own_method(self, facts: ClassFacts, called: str) -> bool:
        """Whether ``called`` names a method of the class or of one of its project bases
        (``Base.load(...)``): the calls of every method are already among what the class
        and its bases construct."""
        owner, _, method = called.rpartition(".")
        found = self._class_facts(owner, facts.path) if owner else None
        return (
            found is not None
            and method in found.methods
            and (found is facts or self._inherits(facts, found.qualname, 0))
        )

    def _call_sensitive(self, called: str, near: str, depth: int, evaluating: bool) -> bool | None:
        found = self._class_facts(called, near)
        if found is not None:
            return self._sensitive(found, depth + 1, evaluating) if depth < _MAX_DEPTH else None
        module, _, name = called.rpartition(".")
        owner = self._module(module, near) if module else None
        helper = None if owner is None else owner.functions.get(name)
        if helper is not None:  # a helper of the project: what it builds decides
            return self._function_sensitive(helper, depth, evaluating)
        if owner is not None and depth < _MAX_DEPTH:
            target = owner.imports.get(name)
            if target is not None and target != called:
                # re-exported by a package: `from .activations import get_activation`
                return self._call_sensitive(target, owner.path, depth + 1, evaluating)
        return _name_sensitive(called, evaluating)

    def _function_sensitive(
        self, helper: FunctionFacts, depth: int, evaluating: bool
    ) -> bool | None:
        key = (f"function-sensitive-{evaluating}", f"{helper.path}:{helper.qualname}")
        if key in self._memo:
            return self._memo[key]  # type: ignore[return-value]
        self._memo[key] = False  # cycle guard
        unknown = False
        for called in helper.calls:
            answer = (
                self._call_sensitive(called, helper.path, depth + 1, evaluating)
                if depth < _MAX_DEPTH
                else None
            )
            if answer:
                self._memo[key] = True
                return True
            unknown = unknown or answer is None
        self._memo[key] = None if unknown else False
        return self._memo[key]  # type: ignore[return-value]

    def _ending(self, facts: ClassFacts, key: str, depth: int) -> str | None:
        """What ``key`` (``method`` or ``method[i]``, see ``ClassFacts.method_endings``)
        of the class ends in, the method looked up in the class, then its project bases."""
        method = key.partition("[")[0]

        def compute() -> str | None:
            if method not in facts.methods:
                for base in self._base_facts(facts):
                    if isinstance(base, str):
                        if base in PLAIN_BASES:
                            continue
                        return None  # a base that cannot be read may define it
                    if depth < _MAX_DEPTH and self._definer(base, method, depth + 1):
                        return self._ending(base, key, depth + 1)
                return None
            ending = facts.method_endings.get(key)
            if ending is None or not ending.startswith("<attr>"):
                return ending
            attribute = ending[len("<attr>") :]
            if attribute in facts.sequential_last:
                return facts.sequential_last[attribute]
            built = facts.attributes.get(attribute)
            if built is None:
                return None
            activation = torchapi.activation_of(built)
            if activation is not None:
                return activation
            layer = self._class_facts(built, facts.path)
            if layer is not None and depth < _MAX_DEPTH:
                return self._ending(layer, "forward", depth + 1)
            return None

        return self._cached(f"ending:{key}", facts, compute)  # type: ignore[return-value]

    def _definer(self, facts: ClassFacts, method: str, depth: int) -> ClassFacts | None:
        """The class or project base (first in base order) that defines ``method``."""
        if method in facts.methods:
            return facts
        if depth >= _MAX_DEPTH:
            return None
        for base in self._base_facts(facts):
            found = None if isinstance(base, str) else self._definer(base, method, depth + 1)
            if found is not None:
                return found
        return None

    def _overridden(self, facts: ClassFacts, method: str) -> bool:
        """Whether a class of the project deriving from ``facts`` defines ``method``."""
        table = self.remember("overriding-methods", self._overriding_methods)
        return method in table.get(f"{facts.path}:{facts.qualname}", ())

    def _overriding_methods(self) -> dict[str, set[str]]:
        """Per class (``path:qualname``), the methods its project subclasses define."""
        table: dict[str, set[str]] = {}
        for modules in self._modules.values():
            for module in modules:
                for cls in module.classes.values():
                    if not cls.methods or not cls.bases:
                        continue
                    seen: set[str] = set()
                    stack = [cls]
                    for _ in range(_MAX_DEPTH):
                        parents = [
                            b for c in stack for b in self._base_facts(c) if not isinstance(b, str)
                        ]
                        stack = []
                        for parent in parents:
                            key = f"{parent.path}:{parent.qualname}"
                            if key not in seen and parent is not cls:
                                seen.add(key)
                                table.setdefault(key, set()).update(cls.methods)
                                stack.append(parent)
                        if not stack:
                            break
        return table


def _name_sensitive(qualified: str, evaluating: bool = False) -> bool | None:
    """Whether a class or function from outside the project is mode-sensitive: ``True``
    / ``False`` for torch's own, ``None`` (unknown) for anything else. ``evaluating``:
    only what is wrong to evaluate with in training mode counts."""
    if qualified.endswith(torchapi.TRAIN_MODE_EXACT):
        return not evaluating
    if qualified in torchapi.MODE_SENSITIVE_FUNCTIONS:
        return True
    if qualified.endswith(torchapi.NO_DROPOUT) or qualified in torchapi.MODE_FREE_LAYERS:
        return False  # nn.LSTM(...) without dropout, a recurrent cell: eval() changes nothing
    last = qualified.rpartition(".")[2]
    if qualified.startswith("torch.nn.") and last[:1].isupper():
        return any(word in last for word in torchapi.MODE_SENSITIVE_WORDS)
    top = qualified.partition(".")[0]
    if (
        qualified.startswith(("torch.", "numpy."))
        or top in sys.stdlib_module_names
        or top in torchapi.MODE_FREE_LIBRARIES
    ):
        return False
    return None


def single_file_index(path: str, tree: ast.Module) -> ProjectIndex:
    """The index of one file alone (``lint_source``, or a file linted by itself)."""
    return ProjectIndex([summarise(path, tree)])
