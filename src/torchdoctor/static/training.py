"""Training-loop vocabulary shared by the rules: what a call *does* in a training program.

:func:`loop_events` turns a loop's recorded items into ordered :class:`Event`\\ s
(``backward``, optimizer ``step``, ``zero_grad``, scheduler step, ``eval()``/``train()``,
a model forward), resolving receivers through :class:`FileContext` (bindings, classes,
name hints); :func:`is_accumulation_guard` recognises ``if (i + 1) % k == 0:``. Whether
a place runs with autograd off is :func:`torchdoctor.static.grad_mode.grad_disabled_by`.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Confidence
from torchdoctor.static import torchapi
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.structure import FunctionScope, Item, Loop

__all__ = [
    "Event",
    "EventKind",
    "classify",
    "function_events",
    "is_accumulation_guard",
    "loop_events",
    "module_itself",
    "receiver_text",
    "train_flag",
]


class EventKind(enum.Enum):
    """What a call or statement does to training state."""

    BACKWARD = "backward"
    OPTIMIZER_STEP = "optimizer step"
    ZERO_GRAD = "zero_grad"
    SCHEDULER_STEP = "scheduler step"
    EVAL = "eval"
    TRAIN = "train"
    SET_MODE = "set mode"  # model.train(flag) with a flag only known at run time
    FORWARD = "forward"


@dataclass(slots=True)
class Event:
    """One training-relevant action, in source order.

    Attributes:
        kind: what it does.
        item: the recorded call or statement (its frames give the nesting).
        target: the object acted on: the optimizer stepped (also for
            ``scaler.step(opt)``), the model put in eval mode or called, the loss
            ``backward()`` runs on; ``None`` when there is none.
        confidence: ``HIGH`` when the receiver's class is known, ``MEDIUM`` when only its
            name suggests it (``optimizer`` passed as a parameter).
    """

    kind: EventKind
    item: Item
    target: ast.expr | None
    confidence: Confidence = Confidence.HIGH

    @property
    def node(self) -> ast.AST:
        """The call or statement."""
        return self.item.node

    @property
    def line(self) -> int:
        """Its line."""
        return self.item.line


def loop_events(ctx: FileContext, loop: Loop, *, forwards: bool = True) -> list[Event]:
    """The events of a loop (nested loops included), in source order. Cached.

    ``forwards=False`` leaves out :attr:`EventKind.FORWARD` (and the others keep their
    order): for a rule that never looks at model calls, it spares telling whether each
    call of the loop is a model's, the costly part of classifying.
    """
    return _cached_events(
        loop._cache,
        ("events", "events-without-forwards"),
        lambda with_forwards: _events(ctx, loop.items, loop.function, forwards=with_forwards),
        forwards,
    )


def function_events(
    ctx: FileContext, function: FunctionScope, *, forwards: bool = True
) -> list[Event]:
    """The events of a function body (nested functions excluded), in source order.
    Cached; ``forwards`` as for :func:`loop_events`."""
    return _cached_events(
        ctx.memo,
        (("events", id(function), True), ("events", id(function), False)),
        lambda with_forwards: _events(ctx, function.items, function, forwards=with_forwards),
        forwards,
    )


def _cached_events(
    store: dict[Any, object],
    keys: tuple[object, object],
    compute: Callable[[bool], list[Event]],
    forwards: bool,
) -> list[Event]:
    """The events under ``keys`` (with model calls, without), computed once each; the
    list without model calls is filtered from the full one when that is known."""
    full_key, partial_key = keys
    full = store.get(full_key)
    if forwards:
        if full is None:
            full = store[full_key] = compute(True)
        return full  # type: ignore[return-value]
    partial = store.get(partial_key)
    if partial is None:
        partial = store[partial_key] = (
            compute(False) if full is None else [e for e in full if e.kind is not EventKind.FORWARD]  # type: ignore[attr-defined]
        )
    return partial  # type: ignore[return-value]


def _events(
    ctx: FileContext, items: Iterable[Item], scope: Scope, *, forwards: bool = True
) -> list[Event]:
    out = []
    for item in items:
        event = classify(ctx, item, scope, forwards=forwards)
        if event is not None:
            out.append(event)
    return out


def classify(ctx: FileContext, item: Item, scope: Scope, *, forwards: bool = True) -> Event | None:
    """What one recorded item does, or ``None`` when it is nothing lint tracks (with
    ``forwards=False``, also for a model call).

    Memoised per file: an item of a nested loop is classified for each loop around it,
    and by several rules. The key holds everything the answer reads that can change
    during the walk (the imports, functions and classes recorded so far, the function
    being walked), so a repeated question gets the answer it would have computed.
    """
    key = (
        "classify",
        id(item),
        id(scope),
        id(ctx.function),
        ctx.import_count,
        len(ctx.module.functions),
        len(ctx.module.classes),
    )
    memo = ctx.memo
    cached = memo.get(key)
    if cached is not None:
        event = cached[1]  # type: ignore[index]
        if forwards or event is None or event.kind is not EventKind.FORWARD:
            return event  # type: ignore[no-any-return]
        return None
    if not forwards:
        # Answered apart (a model call reads as None here), never stored as the answer.
        partial_key = ("classify-without-forwards", *key[1:])
        cached = memo.get(partial_key)
        if cached is None:
            cached = memo[partial_key] = (item, _classify(ctx, item, scope, False), scope)
        return cached[1]  # type: ignore[index, no-any-return]
    event = _classify(ctx, item, scope, True)
    # The item is kept with its answer: an item made for one question (not recorded by
    # the walk) cannot be freed and its id given to another while the key names it.
    memo[key] = (item, event, scope, ctx.function)
    return event


def _classify(ctx: FileContext, item: Item, scope: Scope, forwards: bool) -> Event | None:
    node = item.node
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr == "grad":
                return Event(EventKind.ZERO_GRAD, item, target.value)
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute):
        return _classify_method(ctx, item, node, func, scope, forwards)
    if isinstance(func, ast.Name) and ctx.is_call_to(node, "torch.autograd.backward", scope=scope):
        return Event(EventKind.BACKWARD, item, node.args[0] if node.args else None)
    return _forward(ctx, item, node, scope) if forwards else None


def _classify_method(
    ctx: FileContext, item: Item, call: ast.Call, func: ast.Attribute, scope: Scope, forwards: bool
) -> Event | None:
    method, receiver = func.attr, func.value
    if method in ("backward", "manual_backward"):
        return _backward(ctx, item, call, receiver, scope)
    if method == "step":
        return _step(ctx, item, call, receiver, scope)
    if method == "zero_grad" or (method in ("zero_", "detach_") and _is_grad(receiver)):
        return Event(EventKind.ZERO_GRAD, item, receiver)
    if method == "eval" and not call.args and not call.keywords:
        return Event(EventKind.EVAL, item, module_itself(receiver))
    if method == "train":
        return _train(item, call, module_itself(receiver))
    if method == "forward" and forwards and ctx.is_in_family(receiver, torchapi.MODULE, scope):
        return Event(EventKind.FORWARD, item, receiver)
    if ctx.is_call_to(call, "torch.autograd.backward", scope=scope):
        return Event(EventKind.BACKWARD, item, call.args[0] if call.args else None)
    if ctx.is_call_to(call, "torch._foreach_zero_", scope=scope):
        return Event(EventKind.ZERO_GRAD, item, None)
    return _forward(ctx, item, call, scope) if forwards else None


def _backward(
    ctx: FileContext, item: Item, call: ast.Call, receiver: ast.expr, scope: Scope
) -> Event | None:
    if (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Name)
        and receiver.func.id == "super"
    ):
        return None
    if ctx.is_call_to(call, "torch.autograd.backward", scope=scope):
        return Event(EventKind.BACKWARD, item, call.args[0] if call.args else None)
    if (ctx.qualified_name(call.func, scope) or "").startswith("torch.ops."):
        return None  # torch.ops.wkv6.backward(...): a custom kernel's op, not a loss's
    if _looks_like_class(ctx, receiver, scope):
        return None  # SomeFunction.backward(ctx, grad): an autograd.Function, not a loss
    given = next((k.value for k in call.keywords if k.arg == "loss"), None)
    if given is not None and not isinstance(receiver, ast.Call):
        # ColossalAI's booster.backward(loss=loss / k, optimizer=optimizer)
        return Event(EventKind.BACKWARD, item, given)
    if call.args and not isinstance(receiver, ast.Call):
        # accelerator.backward(loss), fabric.backward(loss), self.manual_backward(loss)
        name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
        if name in (
            "accelerator",
            "fabric",
            "self",
            "trainer",
            "engine",
            "model_engine",
            "deepspeed",
            "manager",
            "booster",
        ):
            return Event(EventKind.BACKWARD, item, call.args[0])
    return Event(EventKind.BACKWARD, item, receiver)


def _step(
    ctx: FileContext, item: Item, call: ast.Call, receiver: ast.expr, scope: Scope
) -> Event | None:
    found = ctx.family_of(receiver, scope)
    if found is None:
        return None
    family, confidence = found
    if family == torchapi.OPTIMIZER:
        return Event(EventKind.OPTIMIZER_STEP, item, receiver, confidence)
    if family == torchapi.GRAD_SCALER:
        target = call.args[0] if call.args else None
        return Event(EventKind.OPTIMIZER_STEP, item, target, confidence)
    if family == torchapi.SCHEDULER:
        return Event(EventKind.SCHEDULER_STEP, item, receiver, confidence)
    return None


def _train(item: Item, call: ast.Call, receiver: ast.expr) -> Event:
    mode = train_flag(call)
    if mode is None:
        return Event(EventKind.SET_MODE, item, receiver)
    return Event(EventKind.TRAIN if mode else EventKind.EVAL, item, receiver)


def train_flag(call: ast.Call) -> bool | None:
    """The mode ``module.train(...)`` sets: ``True`` for ``train()`` or ``train(True)``,
    ``False`` for ``train(False)`` (``mode=`` too), ``None`` for a flag only known at run
    time."""
    flag = (
        call.args[0]
        if call.args
        else next((k.value for k in call.keywords if k.arg == "mode"), None)
    )
    if flag is None or (isinstance(flag, ast.Constant) and flag.value is True):
        return True
    if isinstance(flag, ast.Constant) and flag.value is False:
        return False
    return None


def _forward(ctx: FileContext, item: Item, call: ast.Call, scope: Scope) -> Event | None:
    func = call.func
    if not isinstance(func, (ast.Name, ast.Attribute, ast.Subscript)):
        return None
    if isinstance(func, ast.Name) and _constructs(ctx, func):
        return None  # `PreActResNet18()`: builds a model, runs none
    found = ctx.family_of(func, scope)
    if found is not None and found[0] == torchapi.MODULE:
        return Event(EventKind.FORWARD, item, func, found[1])
    return None


_RETURNS_SELF = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "half",
        "double",
        "bfloat16",
        "requires_grad_",
        "train",
        "eval",
        "share_memory",
        "xpu",
        "mps",
    }
)


def module_itself(expr: ast.expr) -> ast.expr:
    """``model`` for ``model.to(device).requires_grad_(False)``: the module itself."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _RETURNS_SELF
    ):
        expr = expr.func.value
    return expr


def _is_grad(expr: ast.expr) -> bool:
    """``p.grad`` or ``p.grad.data``."""
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    return isinstance(expr, ast.Attribute) and expr.attr == "grad"


def _constructs(ctx: FileContext, func: ast.Name) -> bool:
    """Whether calling the name builds a model rather than running one: a class of this
    file, or an imported class (``from models import PreActResNet18``) or model factory
    (``torchvision.models``, ``timm``)."""
    if ctx.local_class(func.id) is not None:
        return True
    imported = ctx.imports.get(func.id)
    if imported is None:
        return False
    last = imported.rpartition(".")[2]
    return (last[:1].isupper() and not last.isupper()) or imported.startswith(
        ("torchvision.models.", "timm.")
    )


def _looks_like_class(ctx: FileContext, expr: ast.expr, scope: Scope, depth: int = 0) -> bool:
    name = (
        expr.id
        if isinstance(expr, ast.Name)
        else (expr.attr if isinstance(expr, ast.Attribute) else "")
    )
    if isinstance(expr, ast.Name) and ctx.local_class(expr.id) is not None:
        return True
    if isinstance(expr, ast.Name):
        # `V_loss = criterion(...)` then `V_loss.backward()`: capitalised, but a value the
        # code computed, not a class; so is `G_loss = D_fake_loss` (BEGAN), unless what
        # it names is itself a class (`Fn = MyFunction`).
        binding = ctx.binding(expr, scope)
        if binding is not None and binding.kind in (BindingKind.ASSIGN, BindingKind.UNPACKED):
            value = binding.value
            if isinstance(value, (ast.Name, ast.Attribute)) and depth < 3:
                return _looks_like_class(ctx, value, scope, depth + 1)
            if value is not None:
                return False
    return name[:1].isupper() and not name.isupper()


def is_accumulation_guard(test: ast.expr) -> bool:
    """Whether an ``if`` test looks like a gradient-accumulation boundary.

    ``(i + 1) % k == 0``, ``step % accum_steps == 0``, ``not (i + 1) % k``, and names such
    as ``accelerator.sync_gradients``, ``should_step`` or ``is_accumulating``.
    """
    stack: list[ast.AST] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            words = torchapi.name_tokens(node.id if isinstance(node, ast.Name) else node.attr)
            if {
                "accum",
                "accumulate",
                "accumulation",
                "accumulating",
                "sync",
                "step",
                "update",
                "last",
            } & set(words):
                return True
        if isinstance(node, (ast.BoolOp, ast.UnaryOp, ast.Compare, ast.BinOp, ast.Call)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def receiver_text(ctx: FileContext, expr: ast.AST | None, default: str = "optimizer") -> str:
    """Source text of an event's target for messages (``optimizer``, ``self.opt``)."""
    if expr is None:
        return default
    text = ctx.segment(expr)
    return text if text and len(text) <= 40 and "\n" not in text else default
