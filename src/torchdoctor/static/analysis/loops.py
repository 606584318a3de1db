"""What a loop does, for the rules that care where code runs in a training loop.

A *step loop* runs a training step (``backward()`` or an optimizer step) on each of its own
iterations, itself or through a helper of the same file that steps once per call: it is
the hot loop, where anything that runs every iteration runs every step. A *training loop*
runs a step somewhere inside it (an epoch loop around a step loop is one). A *periodic
guard* is an ``if`` that lets its body run only now and then (``step % 50 == 0``,
``i == 0``). :func:`loop_bound_names` gives the names a loop assigns (what may change from
one iteration to the next); :func:`at_most_passes` how many passes a loop over a fixed
collection makes. Rules call these from their scope-end hooks, once the file
has been walked.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Iterator
from typing import cast

from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Item, Loop
from torchdoctor.static.training import Event, EventKind, classify, is_accumulation_guard
from torchdoctor.static.values import bound_value

__all__ = [
    "at_most_passes",
    "element_pairs",
    "enclosing_loops",
    "function_trains",
    "guard_between",
    "is_periodic_condition",
    "is_periodic_guard",
    "items_of",
    "local_frames",
    "loop_bound_names",
    "loop_of",
    "names_bound_in",
    "negation",
    "skip_before",
    "step_functions",
    "step_events",
    "steps_every_iteration",
    "trains",
]

_STEPS = (EventKind.BACKWARD, EventKind.OPTIMIZER_STEP)
_STEP_NAMES = frozenset({"backward", "manual_backward", "step"})
_SCOPE_KINDS = (FrameKind.FUNCTION, FrameKind.CLASS, FrameKind.MODULE)


def local_frames(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The frames inside the innermost function (or module), outermost first."""
    for index in range(len(frames) - 1, -1, -1):
        if frames[index].kind in _SCOPE_KINDS:
            return frames[index + 1 :]
    return frames


def innermost_loop(item: Item) -> ast.AST | None:
    """The node of the innermost loop around ``item`` in its own function, if any."""
    loops = [f.node for f in local_frames(item.frames) if f.kind is FrameKind.LOOP]
    return loops[-1] if loops else None


def loop_of(ctx: FileContext, frame: Frame) -> Loop | None:
    """The :class:`Loop` of a loop frame (once the file has been walked)."""
    table = ctx.memo.get(("loops", "by-node"))
    if not isinstance(table, dict) or len(table) != len(ctx.module.all_loops):
        table = {id(loop.node): loop for loop in ctx.module.all_loops}
        ctx.memo[("loops", "by-node")] = table
    found = table.get(id(frame.node))
    return found if isinstance(found, Loop) else None


def enclosing_loops(ctx: FileContext, frames: tuple[Frame, ...]) -> list[Loop]:
    """Loops around a place in its own function, innermost first."""
    loops = []
    for frame in reversed(local_frames(frames)):
        if frame.kind is FrameKind.LOOP:
            loop = loop_of(ctx, frame)
            if loop is not None:
                loops.append(loop)
    return loops


_DICT_VIEWS = frozenset({"items", "keys", "values"})


def at_most_passes(ctx: FileContext, loop: Loop) -> int | None:
    """How many passes a ``for`` loop makes at most, when its source shows it: a literal
    collection (or a dict view of one), directly or through a name bound to it, or
    ``range`` of integer constants. ``None`` when it depends on data."""
    node = loop.node
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return None
    iterable: ast.expr = node.iter
    for _ in range(2):
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Attribute)
            and iterable.func.attr in _DICT_VIEWS
            and not iterable.args
        ):
            iterable = iterable.func.value
        if isinstance(iterable, ast.Name):
            source = bound_value(ctx, iterable, loop.function)
            if source is None or iterable.id in _grown_names(ctx):
                return None
            iterable = source[0]
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in iterable.elts):
            return None
        return len(iterable.elts)
    if isinstance(iterable, ast.Dict):
        return None if any(k is None for k in iterable.keys) else len(iterable.keys)
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "range"
    ):
        bounds = [
            a.value for a in iterable.args if isinstance(a, ast.Constant) and type(a.value) is int
        ]
        if len(bounds) != len(iterable.args) or not bounds or iterable.keywords:
            return None
        if len(bounds) > 3 or (len(bounds) == 3 and bounds[2] == 0):
            return None  # not a valid range: the program fails there itself
        return len(range(*bounds))
    return None


_GROWERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "__setitem__"})


def _grown_names(ctx: FileContext) -> frozenset[str]:
    """Names whose collection the file may grow after building it (``d[k] = v``,
    ``xs.append(v)``, ``d.update(...)``), once per file."""
    key = ("loops", "grown-names")
    cached = ctx.memo.get(key)
    if cached is None:
        names = set()
        for node in ast.walk(ctx.tree):
            if (
                isinstance(node, ast.Subscript)
                and not isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
            ):
                names.add(node.value.id)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _GROWERS
                and isinstance(node.func.value, ast.Name)
            ):
                names.add(node.func.value.id)
        cached = ctx.memo[key] = frozenset(names)
    return cast("frozenset[str]", cached)


def loop_bound_names(loop: Loop) -> set[str]:
    """Names assigned anywhere in a loop, computed once per loop."""
    cached = loop._cache.get("bound_names")
    if cached is None:
        cached = loop._cache["bound_names"] = names_bound_in(loop.node)
    return cast("set[str]", cached)


def names_bound_in(node: ast.AST) -> set[str]:
    """Names assigned anywhere in a loop (targets, ``+=``, ``with ... as``, ``:=``)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Name) and isinstance(current.ctx, (ast.Store, ast.Del)):
            names.add(current.id)
        elif (
            isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            and current is not node
        ):
            continue
        stack.extend(ast.iter_child_nodes(current))
    return names


def steps_every_iteration(ctx: FileContext, loop: Loop) -> bool:
    """Whether the loop runs a training step on each of its own iterations. Cached."""
    cached = loop._cache.get("steps-every-iteration")
    if cached is None:
        cached = loop._cache["steps-every-iteration"] = _steps_every_iteration(ctx, loop)
    return bool(cached)


def step_events(ctx: FileContext, items: list[Item], scope: Scope) -> Iterator[Event]:
    """The ``backward`` and optimizer/scheduler ``step`` events among ``items``; cheaper than
    classifying every call when only steps matter."""
    for item in items:
        node = item.node
        if isinstance(node, ast.Call) and _STEP_NAMES.intersection(
            (getattr(node.func, "attr", None), getattr(node.func, "id", None))
        ):
            event = classify(ctx, item, scope)
            if event is not None:
                yield event


def _steps_every_iteration(ctx: FileContext, loop: Loop) -> bool:
    for event in step_events(ctx, loop.items, loop.function):
        if event.kind in _STEPS and loop.is_direct(event.item):
            return True
    steppers = step_functions(ctx)
    return any(called in steppers for called in _direct_local_calls(ctx, loop))


def trains(ctx: FileContext, loop: Loop) -> bool:
    """Whether a training step runs anywhere inside the loop (nested loops, helpers)."""
    if steps_every_iteration(ctx, loop) or any(trains(ctx, child) for child in loop.children):
        return True
    return any(function_trains(ctx, called) for called in _direct_local_calls(ctx, loop))


def step_functions(ctx: FileContext) -> set[FunctionScope]:
    """Functions of the file that run one training step per call (outside any loop)."""
    cached = ctx.memo.get(("loops", "step-functions"))
    if cached is None:
        cached = ctx.memo[("loops", "step-functions")] = {
            function for function in ctx.module.functions if _steps_per_call(ctx, function)
        }
    return cached  # type: ignore[return-value]


def _steps_per_call(ctx: FileContext, function: FunctionScope) -> bool:
    for event in step_events(ctx, function.items, function):
        if event.kind in _STEPS and not any(
            f.kind is FrameKind.LOOP for f in local_frames(event.item.frames)
        ):
            return True
    return False


def function_trains(ctx: FileContext, function: FunctionScope) -> bool:
    """Whether calling ``function`` runs a training step: it steps once per call, or one
    of its loops trains (through the helpers it calls too)."""
    if function in step_functions(ctx):
        return True
    # Helpers that call each other (a helper whose loop calls an evaluation that calls the
    # helper again): while a function is being answered, reaching it again adds nothing.
    answering = cast("set[FunctionScope]", ctx.memo.setdefault(("loops", "answering"), set()))
    if function in answering:
        return False
    answering.add(function)
    try:
        return any(trains(ctx, loop) for loop in function.loops)
    finally:
        answering.discard(function)


def _direct_local_calls(ctx: FileContext, loop: Loop) -> Iterator[FunctionScope]:
    for item in loop.items:
        if isinstance(item.node, ast.Call) and loop.is_direct(item):
            called = ctx.resolve_local_call(item.node, loop.function)
            if called is not None and called is not loop.function:
                yield called


def guard_between(
    frames: tuple[Frame, ...], outer: Frame | None, accept: Callable[[ast.If, bool], bool]
) -> ast.If | None:
    """The first ``if`` between a place and ``outer`` (exclusive) that ``accept`` likes.

    ``accept(if_node, in_body)`` gets ``in_body=False`` for the ``else`` branch. With
    ``outer=None`` every ``if`` of the place's own function counts.
    """
    for frame in reversed(local_frames(frames)):
        if frame is outer:
            return None
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            node = frame.node
            assert isinstance(node, ast.If)
            if accept(node, frame.kind is FrameKind.IF_BODY):
                return node
    return None


def skip_before(
    frames: tuple[Frame, ...], outer: Frame, line: int, accept: Callable[[ast.expr], bool]
) -> ast.If | None:
    """An ``if TEST: ... continue`` earlier in the loop ``outer`` than the place at
    ``line`` (in its block or a block around it, inside ``outer``) such that ``accept``
    likes what must hold for the place to run, the test's :func:`negation`:
    ``if not step or step % k != 0: continue`` guards what follows as ``if step % k ==
    0:`` would."""
    inside = local_frames(frames)
    start = next((i for i, f in enumerate(inside) if f is outer), None)
    if start is None:
        return None
    for frame in inside[start:]:
        for skip in _skips(frame):
            if (skip.end_lineno or skip.lineno) >= line:
                break
            if accept(negation(skip.test)):
                return skip
    return None


# The skips (`if ...: continue` with no `else`) of each block, in order, read once per
# block: a loop body of thousands of statements is not walked again for every call in it.
_SKIPS: weakref.WeakKeyDictionary[ast.AST, dict[FrameKind, list[ast.If]]] = (
    weakref.WeakKeyDictionary()
)


def _skips(frame: Frame) -> list[ast.If]:
    by_kind = _SKIPS.setdefault(frame.node, {})
    found = by_kind.get(frame.kind)
    if found is None:
        found = by_kind[frame.kind] = [
            statement
            for statement in _block(frame)
            if isinstance(statement, ast.If)
            and not statement.orelse
            and isinstance(statement.body[-1], ast.Continue)
        ]
    return found


def _block(frame: Frame) -> list[ast.stmt]:
    """The statements of the block a frame stands for."""
    node = frame.node
    if frame.kind is FrameKind.IF_ELSE:
        return cast("list[ast.stmt]", getattr(node, "orelse", []))
    if frame.kind in (FrameKind.LOOP, FrameKind.IF_BODY, FrameKind.WITH, FrameKind.TRY):
        return cast("list[ast.stmt]", getattr(node, "body", []))
    return []


_INVERSE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def negation(test: ast.expr) -> ast.expr:
    """The test that holds when ``test`` does not, pushed through ``not``, ``and``/``or``
    and single comparisons (``not a or i % k != 0`` gives ``a and i % k == 0``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if isinstance(test, ast.BoolOp):
        op: ast.boolop = ast.And() if isinstance(test.op, ast.Or) else ast.Or()
        return ast.BoolOp(op=op, values=[negation(v) for v in test.values])
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        inverse = _INVERSE.get(type(test.ops[0]))
        if inverse is not None:
            return ast.Compare(left=test.left, ops=[inverse()], comparators=test.comparators)
    return ast.UnaryOp(op=ast.Not(), operand=test)


def is_periodic_guard(test: ast.expr) -> bool:
    """Whether an ``if`` test lets its body run only on some iterations.

    ``step % 50 == 0``, ``not i % k``, ``i == 0``, ``batch_idx == len(loader) - 1`` and
    the names of :func:`~torchdoctor.static.training.is_accumulation_guard`
    (``should_step``, ``is_last``...).
    """
    if is_accumulation_guard(test):
        return True
    return any(
        isinstance(node, ast.Compare) and _compares_a_counter(node) for node in _test_parts(test)
    )


def is_periodic_condition(test: ast.expr) -> bool:
    """Whether ``test`` holds only on some iterations by its arithmetic, not by a name:
    ``i % k == 0``, ``not i % k``, ``i == 0``, or a conjunction with one of them. Stricter
    than :func:`is_periodic_guard`, whose names (``initial_step``, ``sync``) may hold on
    every iteration; for what a loop skips to, where a wrong guess hides every step."""
    if isinstance(test, ast.BoolOp):
        parts = [is_periodic_condition(value) for value in test.values]
        return any(parts) if isinstance(test.op, ast.And) else all(parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.BinOp) and isinstance(test.operand.op, ast.Mod)
    if isinstance(test, ast.Compare) and all(isinstance(op, ast.Eq) for op in test.ops):
        sides = [test.left, *test.comparators]
        return _compares_a_counter(test) or any(
            isinstance(side, ast.BinOp) and isinstance(side.op, ast.Mod) for side in sides
        )
    return False


def _test_parts(test: ast.expr) -> Iterator[ast.expr]:
    stack = [test]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.BoolOp):
            stack.extend(node.values)
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)


def _compares_a_counter(node: ast.Compare) -> bool:
    if not all(isinstance(op, ast.Eq) for op in node.ops):
        return False
    sides = [node.left, *node.comparators]
    if any(isinstance(side, ast.Constant) and isinstance(side.value, str) for side in sides):
        return False  # device.type == "cuda": true on every iteration
    return any(_is_counter(side) for side in sides)


_COUNTER_WORDS = frozenset(
    {
        "step",
        "steps",
        "iter",
        "iteration",
        "it",
        "idx",
        "index",
        "batch",
        "epoch",
        "i",
        "j",
        "n",
        "count",
        "counter",
        "num",
    }
)


def _is_counter(expr: ast.expr) -> bool:
    """An int constant, or a name that reads like a loop counter (``step``, ``batch_idx``)."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int) and not isinstance(expr.value, bool)
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            if len(node.id) == 1:
                return True  # i, k: the usual loop counters
            words = torchapi.name_tokens(node.id)
        elif isinstance(node, ast.Attribute):
            words = torchapi.name_tokens(node.attr)
        else:
            continue
        if _COUNTER_WORDS & set(words):
            return True
    return False


def items_of(loop: Loop, kind: type[ast.AST]) -> Iterator[Item]:
    """The loop's recorded items whose node is a ``kind``."""
    return (item for item in loop.items if isinstance(item.node, kind))


def element_pairs(target: ast.expr, source: ast.expr) -> list[tuple[ast.expr, ast.expr]] | None:
    """``(iterable, target part)`` for ``a, b in zip(xs, ys)`` and ``i, x in
    enumerate(xs)``, nested (``i, (a, b) in enumerate(zip(xs, ys))``); ``None`` for
    any other shape."""
    if not (
        isinstance(source, ast.Call)
        and isinstance(source.func, ast.Name)
        and isinstance(target, (ast.Tuple, ast.List))
        and not any(isinstance(arg, ast.Starred) for arg in source.args)
    ):
        return None
    if source.func.id == "zip" and len(source.args) == len(target.elts):
        parts = zip(source.args, target.elts, strict=True)
    elif source.func.id == "enumerate" and source.args and len(target.elts) == 2:
        parts = zip(source.args[:1], target.elts[1:], strict=True)
    else:
        return None
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for iterable, element in parts:
        pairs += element_pairs(element, iterable) or [(iterable, element)]
    return pairs
