"""Following calls between the functions of one file, both ways.

:func:`called_function` is the function or method of the file a call runs (``f()``,
``self.f()``, ``obj.f()`` on an instance of a class of the file); :func:`passed_values`
goes the other way, from a parameter to what the file's callers pass for it;
:func:`constant_arguments` gives the parameters one call fixes to literal constants (the
flags that decide a helper's branches for that call), :func:`truth_under` the value of a
test over such constants and :func:`ruled_out` the code such a call does not run;
:func:`project_calls` gathers the calls of a function from the file and from the
project's modules that import it, and :func:`switched_off_by_every_call` tells code no
call of its function runs.
"""

from __future__ import annotations

import ast
import os

from torchdoctor.static.analysis.calls import assigned_names, keyword, last_name
from torchdoctor.static.analysis.related_files import importing_paths, parsed_module
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.project import PLAIN_BASES
from torchdoctor.static.structure import ClassScope, Frame, FrameKind, FunctionScope, Item

__all__ = [
    "UNDECIDED",
    "Passed",
    "called_function",
    "class_constructions",
    "constant_arguments",
    "is_spawn",
    "local_method",
    "never_run",
    "passed_values",
    "project_call_sites",
    "project_calls",
    "ruled_out",
    "spawned_argument",
    "switched_off_by_every_call",
    "truth_under",
]


def called_function(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    """The local function or method a call runs: ``f()``, ``self.f()``, or ``obj.f()`` on
    an instance of a class of this file."""
    found = ctx.resolve_local_call(call, scope)
    if found is not None or not isinstance(call.func, ast.Attribute):
        return found
    type_name = ctx.instance_type(call.func.value, scope)
    if type_name is None or not type_name.startswith("<local>."):
        return None
    cls = ctx.local_class(type_name[len("<local>.") :])
    return cls.methods.get(call.func.attr) if cls is not None else None


Passed = tuple[ast.expr, Scope, ast.Call]  # an argument, the caller's scope, the call


def passed_values(ctx: FileContext, name: ast.Name, scope: Scope) -> list[Passed]:
    """What the file's callers pass for the parameter ``name`` of function ``scope``."""
    if not isinstance(scope, FunctionScope):
        return []
    found = ctx.lookup(name, scope)
    if found is None or found[0].kind is not BindingKind.PARAMETER or found[1] is not scope:
        return []
    out = []
    for caller, item in ctx.callers(scope):
        call = item.node
        if isinstance(call, ast.Call):
            value = scope.argument_for(call, name.id)
            if value is not None:
                out.append((value, caller, call))
    return out


def constant_arguments(call: ast.Call, callee: FunctionScope) -> dict[str, object]:
    """The callee's parameters whose value at ``call`` is a literal constant: passed as
    one (by position or keyword) or left to a constant default; none that the callee
    rebinds."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return {}
    args = callee.node.args
    params = callee.positional_names(call)
    given: dict[str, ast.expr] = dict(zip(params, call.args, strict=False))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    defaults = callee.parameter_defaults
    out: dict[str, object] = {}
    for name in [*params, *(a.arg for a in args.kwonlyargs)]:
        value = given.get(name, defaults.get(name))
        if isinstance(value, ast.Constant):
            out[name] = value.value
    if out:  # a parameter the helper rebinds is no longer what the call passed
        for item in callee.items:
            for bound in assigned_names(item.node):
                out.pop(bound, None)
    return out


UNDECIDED = object()  # what truth_under gives for a test the constants do not decide


def truth_under(test: ast.expr | None, constants: dict[str, object]) -> object:
    """The value of a test over names bound to constants (``flag``, ``not flag``, ``mode
    == "val"``, ``x is None``), or ``UNDECIDED``."""
    if isinstance(test, ast.Name):
        return constants.get(test.id, UNDECIDED)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth_under(test.operand, constants)
        return inner if inner is UNDECIDED else not inner
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Name)
        and isinstance(test.comparators[0], ast.Constant)
        and test.left.id in constants
    ):
        left, right = constants[test.left.id], test.comparators[0].value
        op = test.ops[0]
        if isinstance(op, (ast.Eq, ast.Is)):
            return left == right if isinstance(op, ast.Eq) else left is right
        if isinstance(op, (ast.NotEq, ast.IsNot)):
            return left != right if isinstance(op, ast.NotEq) else left is not right
    return UNDECIDED


def never_run(nodes: list[ast.AST]) -> set[int]:
    """The nodes, by id, in the arm of an ``if`` that a switch bound once to a constant
    never takes (physicsnemo's ``load_state_dict = True`` ... ``if load_state_dict:
    model.load_state_dict(state) else: model = state["net"]``; a debug dump under ``TEST =
    False`` ... ``if TEST:``): dead code does nothing. ``nodes`` are a scope's own
    nodes (:func:`torchdoctor.static.names.own_nodes`)."""
    stores: dict[str, int] = {}
    constants: dict[str, object] = {}
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        stores[name.id] = stores.get(name.id, 0) + 1
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, (bool, type(None)))
            ):
                constants[node.targets[0].id] = node.value.value
    constants = {name: value for name, value in constants.items() if stores[name] == 1}
    dead: set[int] = set()
    if not constants:
        return dead
    for node in nodes:
        if isinstance(node, ast.If):
            truth = truth_under(node.test, constants)
            if truth is not UNDECIDED:
                for statement in node.orelse if truth else node.body:
                    dead.update(id(inner) for inner in ast.walk(statement))
    return dead


def ruled_out(item: Item, callee: FunctionScope | None, constants: dict[str, object]) -> bool:
    """Whether an ``if`` inside the callee around ``item`` takes the other branch for the
    constant arguments of a call (:func:`constant_arguments`)."""
    inside = False
    for frame in item.frames:
        if frame.kind is FrameKind.FUNCTION:
            inside = callee is not None and frame.node is callee.node
            continue
        if not inside or frame.kind not in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            continue
        test = truth_under(getattr(frame.node, "test", None), constants)
        if test is not UNDECIDED and bool(test) != (frame.kind is FrameKind.IF_BODY):
            return True
    return False


def project_calls(ctx: FileContext, function: FunctionScope) -> list[ast.Call] | None:
    """Every call of ``function`` the project shows: the file's own and, for a function
    at the file's top level, each call by its name (``get_loader(...)``,
    ``utils.get_loader(...)``) in the project's modules that import the file. ``None``
    when the name is also used as a value (``fn=get_loader``), in the file or an
    importer: calls lint cannot see may then pass anything."""
    key = ("project-calls", id(function))
    if key in ctx.memo:
        return ctx.memo[key]  # type: ignore[return-value]
    calls: list[ast.Call] | None = [
        item.node for _, item in ctx.callers(function) if isinstance(item.node, ast.Call)
    ]
    sites = _named_call_sites(ctx, function.name, function.node in ctx.tree.body)
    if calls is None or sites is None:
        calls = None
    else:
        calls += [call for _, _, call in sites if call not in calls]
    ctx.memo[key] = calls
    return calls


CallSite = tuple[str, ast.Module, ast.Call]  # the file, its tree, a call in it


def project_call_sites(ctx: FileContext, function: FunctionScope) -> list[CallSite] | None:
    """Each call of a function at the file's top level by its name, with the file and
    tree it sits in: this file's and those of the project's modules that import it.
    ``None`` when the name is also used as a value (``fn=validate``) in one of them."""
    if function.node not in ctx.tree.body:
        return None
    key = ("project-call-sites", id(function))
    if key not in ctx.memo:
        ctx.memo[key] = _named_call_sites(ctx, function.name, top_level=True)
    return ctx.memo[key]  # type: ignore[return-value]


def class_constructions(ctx: FileContext, cls: ClassScope) -> list[ast.Call] | None:
    """Every call of the class ``cls`` the project shows (``Cell(...)``,
    ``cells.Cell(...)``): the file's own and, for a class at the file's top level, those
    in the project's modules that import the file. ``None`` when the name is also used
    as a value (a base class, ``factory=Cell``): lint cannot see what those build."""
    key = ("class-constructions", id(cls.node))
    if key not in ctx.memo:
        sites = _named_call_sites(ctx, cls.name, cls.node in ctx.tree.body, of_class=True)
        ctx.memo[key] = None if sites is None else [call for _, _, call in sites]
    return ctx.memo[key]  # type: ignore[return-value]


def _named_call_sites(
    ctx: FileContext, name: str, top_level: bool, of_class: bool = False
) -> list[CallSite] | None:
    """The calls by ``name`` in this file and, for a name at the file's top level, in the
    project's modules that import it, each with its file and tree; ``None`` when one of
    them reads the name other than by calling it (:func:`_uses_by_name`) or cannot be
    parsed."""
    own = os.path.abspath(ctx.path)
    trees: list[tuple[str, ast.Module | None]] = [(own, ctx.tree)]
    if top_level:
        trees += [(p, parsed_module(ctx.project, p)) for p in importing_paths(ctx.project, own)]
    sites: list[CallSite] = []
    for path, tree in trees:
        calls = None if tree is None else _uses_by_name(tree, name, of_class)
        if calls is None or tree is None:
            return None
        sites += [(path, tree, call) for call in calls]
    return sites


def switched_off_by_every_call(
    ctx: FileContext, frames: tuple[Frame, ...], node: ast.expr, switch: ast.expr | None = None
) -> bool:
    """Whether no call of the function around ``node`` runs it: ``node`` sits under
    ``if flag:`` or in its ``else``, or inside a branch of ``x if flag else y``, where
    ``flag`` is a parameter of the function, and every call the project shows passes, or
    leaves to its default, a literal that takes the other way (VMamba's
    ``get_val_dataloader(sequential=True)`` builds its DistributedSampler only in the
    ``else``, and no caller passes ``sequential``). ``switch``, a parameter that must be
    true for ``node`` to matter (``shuffle=shuffle``), counts as one more test."""
    function = ctx.function_of(frames)
    if function is None:
        return False
    parameters = set(function.parameter_names)
    guards: list[tuple[str, bool]] = []  # a parameter, the truth it needs for node to run
    for frame in frames:
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE) and isinstance(frame.node, ast.If):
            guards += _parameter_test(frame.node.test, frame.kind is FrameKind.IF_BODY, parameters)
    for choice in _parameter_choices(ctx, function, parameters):
        for branch, holds in ((choice.body, True), (choice.orelse, False)):
            if any(part is node for part in ast.walk(branch)):
                guards += _parameter_test(choice.test, holds, parameters)
    if switch is not None:
        guards += _parameter_test(switch, True, parameters)
    calls = project_calls(ctx, function) if guards else None
    if not calls:
        return False
    passed = [constant_arguments(call, function) for call in calls]
    return all(
        any(name in values and bool(values[name]) is not needed for name, needed in guards)
        for values in passed
    )


def _parameter_choices(
    ctx: FileContext, function: FunctionScope, parameters: set[str]
) -> list[ast.IfExp]:
    """The conditional expressions of ``function`` whose test is one of its parameters,
    found once per function (most functions have none)."""
    key = ("parameter-choices", id(function))
    if key not in ctx.memo:
        ctx.memo[key] = [
            inner
            for inner in ast.walk(function.node)
            if isinstance(inner, ast.IfExp) and _parameter_test(inner.test, True, parameters)
        ]
    return ctx.memo[key]  # type: ignore[return-value]


def _parameter_test(test: ast.expr, holds: bool, parameters: set[str]) -> list[tuple[str, bool]]:
    """``[(flag, truth)]`` when ``test`` is a parameter, or its negation, and the branch
    runs when the test is ``holds``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _parameter_test(test.operand, not holds, parameters)
    if isinstance(test, ast.Name) and test.id in parameters:
        return [(test.id, holds)]
    return []


# Calls that read a class without building it.
_CLASS_READERS = frozenset({"super", "isinstance", "issubclass"})


def _uses_by_name(tree: ast.AST, name: str, of_class: bool = False) -> list[ast.Call] | None:
    """The calls of ``name`` (a plain name or an attribute) in a tree; ``None`` when the
    name is read other than as the function of a call. For a class (``of_class``), reading
    it in ``super(Cls, self)``, ``isinstance`` or ``issubclass`` builds nothing either."""
    calls: list[ast.Call] = []
    called: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if last_name(node.func) == name:
            calls.append(node)
            called.add(id(node.func))
        elif of_class and last_name(node.func) in _CLASS_READERS:
            called.update(id(argument) for argument in node.args)
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Name, ast.Attribute))
            and last_name(node) == name
            and isinstance(getattr(node, "ctx", None), ast.Load)
            and id(node) not in called
        ):
            return None
    return calls


# Launchers that run a function in each of the processes they start.
_SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


def is_spawn(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """``mp.spawn(fn, ...)`` or ``start_processes``, through any import of
    ``torch.multiprocessing``: a call that runs ``fn`` in every process it starts."""
    return ctx.qualified_name(call.func, scope) in _SPAWNERS


def spawned_argument(call: ast.Call) -> ast.expr | None:
    """The function a spawn call hands its processes, as written (``fn=`` too)."""
    return call.args[0] if call.args else getattr(keyword(call, "fn"), "value", None)


def spawned_function(ctx: FileContext, call: ast.Call, scope: Scope) -> FunctionScope | None:
    """The function of the file that ``mp.spawn(main_worker, nprocs=...)`` runs in every
    process it starts, when ``call`` is such a launch."""
    if not is_spawn(ctx, call, scope):
        return None
    target = spawned_argument(call)
    if not isinstance(target, ast.Name):
        return None
    return ctx.resolve_local_call(ast.Call(func=target, args=[], keywords=[]), scope)


def local_method(
    ctx: FileContext, class_name: str, method: str, depth: int = 0
) -> FunctionScope | None:
    """The method a class of this file runs for ``method``: its own, or one of a base of
    this file, in the order of the bases; ``None`` when a base it cannot read (not
    ``object`` or ``nn.Module``) may define it first."""
    cls = ctx.local_class(class_name)
    if cls is None or depth > _MAX_BASES:
        return None
    if method in cls.methods:
        return cls.methods[method]
    for base in cls.node.bases:
        if isinstance(base, ast.Name) and ctx.local_class(base.id) is not None:
            found = local_method(ctx, base.id, method, depth + 1)
            if found is not None:
                return found
        elif ctx.qualified_name(base) not in PLAIN_BASES:
            return None
    return None


_MAX_BASES = 6  # how deep a chain of the file's base classes is followed
