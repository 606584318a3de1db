"""Mode changes, forwards and backwards in order, following calls into the same file.

The train/eval mode rules (TD501, TD502) see a scope as a list of :class:`Action` s:
``eval()``/``train()`` calls, model forwards and backward passes (optimizer steps count
as backward). :func:`expand` follows calls to functions of the same file
(:func:`~.events.helper_to_follow`),
mapping parameters to arguments (``evaluate(net)`` calling ``model.eval()`` on its
parameter ``model`` puts ``net`` in eval mode); :func:`exclusive_modes` turns a mode
chosen by a run-time condition (``if phase == "train":``, a ternary) into
:attr:`~torchdoctor.static.training.EventKind.SET_MODE`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from torchdoctor.static.analysis.callers import constant_arguments, ruled_out
from torchdoctor.static.analysis.events import MODE_KINDS, MODE_VIEW, helper_to_follow
from torchdoctor.static.context import FileContext
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Item
from torchdoctor.static.training import EventKind, classify

__all__ = ["MODE", "Action", "arguments", "exclusive_modes", "expand", "mapped", "same_model"]

MODE = MODE_KINDS


@dataclass(frozen=True, slots=True)
class Action:
    """A mode change, forward or backward, seen from the scope being analysed.

    ``origin`` is the item of the analysed scope it comes from (the call of a helper when
    the action happens inside it); ``node`` is where it really happens, inside ``frames``.
    ``steps`` marks the backward that is an optimizer step (``kind`` is ``BACKWARD``).
    """

    kind: EventKind
    target: str
    origin: Item
    node: ast.AST
    grad: bool
    frames: tuple[Frame, ...] = ()
    steps: bool = False


def expand(
    ctx: FileContext,
    items: list[Item],
    scope: FunctionScope | None,
    origin: Item | None = None,
    mapping: dict[str, str] | None = None,
    depth: int = 0,
    grad_off: bool = False,
    stack: tuple[int, ...] = (),
    call: ast.AST | None = None,
) -> list[Action]:
    """The actions of ``items`` in order, following calls to functions of this file.

    Inside a helper, a branch that a constant argument of the call that entered it (or a
    parameter's default) rules out is skipped: ``run_epoch(loader, validate=True)`` never
    reaches the helper's ``if not validate:`` backward, however deep that call is."""
    actions: list[Action] = []
    constants: dict[str, object] | None = None  # read only where a branch asks
    if call is None and origin is not None:
        call = origin.node
    for item in items:
        if isinstance(call, ast.Call) and scope is not None and _in_branch(item, scope):
            if constants is None:
                constants = constant_arguments(call, scope)
            if constants and ruled_out(item, scope, constants):
                continue
        item_grad_off = grad_off or grad_disabled_by(ctx, item.frames) is not None
        event = classify(ctx, item, scope)
        source = origin or item
        kind = MODE_VIEW.get(event.kind) if event is not None else None
        if event is not None and kind is not None:
            target = mapped(ctx.segment(event.target) if event.target is not None else "", mapping)
            steps = event.kind is EventKind.OPTIMIZER_STEP
            actions.append(
                Action(kind, target, source, item.node, not item_grad_off, item.frames, steps)
            )
            continue
        if not isinstance(item.node, ast.Call):
            continue
        callee = helper_to_follow(ctx, item.node, scope, depth, stack)
        if callee is None:
            continue
        actions += expand(
            ctx,
            callee.items,
            callee,
            source,
            arguments(ctx, item.node, callee, mapping),
            depth + 1,
            item_grad_off,
            (*stack, id(callee)),
            item.node,
        )
    return actions


def _in_branch(item: Item, callee: FunctionScope) -> bool:
    """Whether an ``if`` of the callee holds ``item``."""
    frames = item.frames
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        if frame.kind is FrameKind.FUNCTION:
            return False
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            return True
    return False


def mapped(text: str, mapping: dict[str, str] | None) -> str:
    if not mapping or not text:
        return text
    root, dot, rest = text.partition(".")
    return mapping[root] + dot + rest if root in mapping else text


def arguments(
    ctx: FileContext, call: ast.Call, callee: FunctionScope, mapping: dict[str, str] | None
) -> dict[str, str]:
    out = {}
    for param, arg in zip(
        callee.positional_names(call), call.args, strict=False
    ):  # *args: extra args unnamed
        out[param] = mapped(ctx.segment(arg), mapping)
    for keyword in call.keywords:
        if keyword.arg:
            out[keyword.arg] = mapped(ctx.segment(keyword.value), mapping)
    return out


def same_model(first: str, second: str) -> bool:
    return first == second or not first or not second


def exclusive_modes(ctx: FileContext, actions: list[Action]) -> list[Action]:
    """Mode changes chosen by a run-time condition become :attr:`EventKind.SET_MODE`.

    ``if phase == "train": model.train() else: model.eval()``, the ternary ``model.train()
    if phase == "train" else model.eval()``, and ``if phase == "train": model.train()``
    next to ``if phase == "val": model.eval()`` do not leave the model in eval mode: the
    condition picks the mode on every pass. Such an ``eval()`` and ``train()`` of the same
    model (in the two branches of one ``if``/ternary, or under tests of the same variable,
    ``phase``) are both a run-time choice, not an eval followed by a train.
    """
    branches: dict[tuple[int, str], set[FrameKind]] = {}
    for action in actions:
        if action.kind in (EventKind.EVAL, EventKind.TRAIN):
            for frame in action.frames:
                if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
                    branches.setdefault((id(frame.node), action.target), set()).add(frame.kind)
    exclusive = {key for key, kinds in branches.items() if len(kinds) == 2}
    chosen = _chosen_together(ctx, actions)
    if not exclusive and not chosen:
        return actions
    out = []
    for action in actions:
        if action.kind in (EventKind.EVAL, EventKind.TRAIN) and (
            id(action) in chosen
            or any((id(frame.node), action.target) in exclusive for frame in action.frames)
        ):
            action = replace(action, kind=EventKind.SET_MODE)
        out.append(action)
    return out


# One condition an action runs under: the ``if``/ternary node's id, which branch, the
# variable its test selects on (if it reads like ``phase == "train"``) and the test's text.
_Guard = tuple[int, bool, str | None, str]


def _chosen_together(ctx: FileContext, actions: list[Action]) -> set[int]:
    """Ids of ``eval()``/``train()`` actions that a condition chooses between."""
    evals = [a for a in actions if a.kind is EventKind.EVAL]
    trains = [a for a in actions if a.kind is EventKind.TRAIN]
    if not evals or not trains:
        return set()
    guards = {id(a): _guards(ctx, a) for a in (*evals, *trains)}
    chosen: set[int] = set()
    for evaluation in evals:
        for training in trains:
            if evaluation.target == training.target and _decided_together(
                guards[id(evaluation)], guards[id(training)]
            ):
                chosen.update((id(evaluation), id(training)))
    return chosen


def _decided_together(first: list[_Guard], second: list[_Guard]) -> bool:
    """Opposite branches of one ``if``/ternary, or different conditions on one variable
    (``phase == "train"`` and ``phase == "val"``, ``training`` and ``not training``)."""
    for node, branch, key, text in first:
        for other_node, other_branch, other_key, other_text in second:
            if node == other_node and branch != other_branch:
                return True
            if (
                key is not None
                and key == other_key
                and (text, branch) != (other_text, other_branch)
            ):
                return True
    return False


def _guards(ctx: FileContext, action: Action) -> list[_Guard]:
    """The conditions around an action: ``if`` blocks (where it happens and, for a helper,
    where the helper is called) and ternaries it is a branch of."""
    found: list[_Guard] = []
    seen: set[int] = set()
    for frame in (*action.origin.frames, *action.frames):
        node = frame.node
        if (
            frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE)
            and id(node) not in seen
            and isinstance(node, ast.If)
        ):
            seen.add(id(node))
            found.append(
                (
                    id(node),
                    frame.kind is FrameKind.IF_BODY,
                    _selector(ctx, node.test),
                    ctx.segment(node.test),
                )
            )
    for ternary, in_body in _ternaries(ctx).get(id(action.node), ()):
        found.append(
            (id(ternary), in_body, _selector(ctx, ternary.test), ctx.segment(ternary.test))
        )
    return found


def _ternaries(ctx: FileContext) -> dict[int, list[tuple[ast.IfExp, bool]]]:
    """Call id -> the ternaries (``a if test else b``) it is a branch of, with the branch
    (``True``: the value before ``if``). Once per file."""
    key = ("modes", "ternaries")
    cached = ctx.memo.get(key)
    if cached is None:
        table: dict[int, list[tuple[ast.IfExp, bool]]] = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.IfExp):
                for branch, in_body in ((node.body, True), (node.orelse, False)):
                    for inner in ast.walk(branch):
                        if isinstance(inner, ast.Call):
                            table.setdefault(id(inner), []).append((node, in_body))
        cached = ctx.memo[key] = table
    return cached  # type: ignore[return-value]


def _selector(ctx: FileContext, test: ast.expr) -> str | None:
    """The variable a test picks a phase by: ``phase`` for ``phase == "train"``, ``phase in
    ("val", "test")``, ``training`` for ``if training:`` / ``if not training:``."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, (ast.Name, ast.Attribute)):
        return ctx.segment(test)
    if (
        not isinstance(test, ast.Compare)
        or len(test.ops) != 1
        or not isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
    ):
        return None
    left, right = test.left, test.comparators[0]
    if _is_text(left):
        left, right = right, left
    if isinstance(left, (ast.Name, ast.Attribute)) and _is_text(right):
        return ctx.segment(left)
    return None


def _is_text(expr: ast.expr) -> bool:
    """A string constant, or a tuple/list/set of them."""
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return bool(expr.elts) and all(_is_text(e) for e in expr.elts)
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str)
