"""Speed rules: TD703 host-sync-in-hot-loop, TD704 compile-in-loop.

The memory rules of the topic live in :mod:`.memory`, the cuDNN flags rule (TD705) in
:mod:`.cudnn`."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from torchdoctor.findings import Confidence, Depth, Finding, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.loops import (
    enclosing_loops,
    guard_between,
    is_periodic_condition,
    is_periodic_guard,
    local_frames,
    skip_before,
    step_events,
    step_functions,
    steps_every_iteration,
)
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Loop
from torchdoctor.static.training import Event, EventKind

_SYNC_METHODS = frozenset({"item", "cpu", "tolist"})
_SYNC_BUILTINS = frozenset({"print", "float", "int"})
# Methods that show the receiver is a module: `m.cpu().parameters()` moves a model.
_MODULE_METHODS = frozenset(
    {
        "parameters",
        "named_parameters",
        "state_dict",
        "eval",
        "train",
        "modules",
        "named_modules",
        "children",
    }
)


@dataclass(frozen=True, slots=True)
class _HotPlace:
    """Where a call runs once per training step: a step loop, or a step function."""

    frame: Frame
    description: str
    loss_texts: frozenset[str]
    line: int


@detector("TD703", depth=Depth.LINT)
class HostSyncInHotLoop(LintRule):
    """``.item()``, ``.cpu()``, ``.tolist()`` or ``print(loss)`` on every training step."""

    requires = ("backward", "step(")
    call_names = _SYNC_METHODS | _SYNC_BUILTINS | _MODULE_METHODS

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._calls: list[tuple[ast.Call, tuple[Frame, ...]]] = []
        self._module_moves: set[int] = set()

    def visit_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _MODULE_METHODS:
                self._module_moves.add(id(func.value))
                return
            if (
                func.attr not in _SYNC_METHODS
                or node.args
                or (func.attr != "cpu" and node.keywords)
                or id(node) in self._module_moves
            ):
                return
        elif not (isinstance(func, ast.Name) and node.args and func.id in _SYNC_BUILTINS):
            return
        if self.ctx.function is not None or any(
            f.kind is FrameKind.LOOP for f in local_frames(self.ctx.frames)
        ):
            self._calls.append((node, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        places: dict[tuple[int, ...], _HotPlace | None] = {}
        for call, frames in self._calls:
            key = tuple(id(f) for f in local_frames(frames) if f.kind is FrameKind.LOOP) or (
                id(self.ctx.function_of(frames)),
            )
            if key not in places:
                places[key] = self._hot_place(frames)
            place = places[key]
            if place is None or _runs_only_sometimes(frames, place.frame, call.lineno):
                continue
            confidence = self._syncs(call, place, self.ctx.function_of(frames))
            if confidence is not None:
                self._report(call, place, confidence)

    def _hot_place(self, frames: tuple[Frame, ...]) -> _HotPlace | None:
        ctx = self.ctx
        for loop in enclosing_loops(ctx, frames):
            if steps_every_iteration(ctx, loop):
                return _HotPlace(
                    loop.frame,
                    f"the training loop at line {loop.line}",
                    self._loss_texts(step_events(ctx, loop.items, loop.function)),
                    loop.line,
                )
        if any(f.kind is FrameKind.LOOP for f in local_frames(frames)):
            return None
        function = ctx.function_of(frames)
        if function is None or function not in step_functions(ctx):
            return None
        caller = self._calling_loop(function)
        if caller is None:
            return None
        return _HotPlace(
            function.frame,
            f"`{function.name}()`, which runs one training step "
            f"per call from the loop at line {caller.line}",
            self._loss_texts(step_events(ctx, function.items, function)),
            caller.line,
        )

    def _calling_loop(self, function: FunctionScope) -> Loop | None:
        for loop in self.ctx.module.all_loops:
            for item in loop.items:
                if (
                    isinstance(item.node, ast.Call)
                    and self.ctx.resolve_local_call(item.node, loop.function) is function
                ):
                    return loop
        return None

    def _loss_texts(self, events: Iterable[Event]) -> frozenset[str]:
        texts = set()
        for event in events:
            target = event.target
            if event.kind is not EventKind.BACKWARD or target is None:
                continue
            if isinstance(target, ast.Call) and target.args:  # scaler.scale(loss).backward()
                target = target.args[0]
            texts.add(self.ctx.segment(target))
        return frozenset(t for t in texts if t)

    def _syncs(
        self, call: ast.Call, place: _HotPlace, scope: FunctionScope | None
    ) -> Confidence | None:
        """How sure it is that the call reads a device tensor; ``None``: it does not."""
        func = call.func
        if isinstance(func, ast.Name):  # print(loss), float(loss)
            mentioned = any(text in place.loss_texts for text in _printed(self.ctx, call))
            return Confidence.HIGH if mentioned else None
        assert isinstance(func, ast.Attribute)
        receiver = self.ctx.segment(func.value)
        if func.attr == "cpu" and self.ctx.is_in_family(func.value, torchapi.MODULE, scope):
            return None  # model.cpu(): moves a module, reads nothing back
        if any(receiver == t or receiver.startswith((t + ".", t + "[")) for t in place.loss_texts):
            return Confidence.HIGH
        return Confidence.MEDIUM

    def _report(self, call: ast.Call, place: _HotPlace, confidence: Confidence) -> None:
        ctx = self.ctx
        text = ctx.segment(call)
        if len(text) > 50 or "\n" in text:
            text = ctx.segment(call.func) + "(...)"
        self.report(
            call,
            f"`{text}` at line {call.lineno} reads a tensor back to the host on every "
            f"iteration of {place.description}: the CPU waits there until the device has "
            "finished all queued work, so it cannot queue the next step ahead and the "
            "device idles between steps",
            fix_hint="Keep running sums on the device (`total += loss.detach()`) and read "
            "them once per epoch, or log only every N steps "
            "(`if step % 100 == 0:`).",
            evidence={"loop_line": place.line},
            confidence=confidence,
        )


def _printed(ctx: object, call: ast.Call) -> Iterator[str]:
    """Texts of the values a ``print``/``float``/``int`` call reads (f-string fields too)."""
    for argument in call.args:
        if isinstance(argument, ast.JoinedStr):
            for part in argument.values:
                if isinstance(part, ast.FormattedValue):
                    yield ast.unparse(part.value)
        elif isinstance(argument, (ast.Name, ast.Attribute)):
            yield ast.unparse(argument)


def _runs_only_sometimes(frames: tuple[Frame, ...], outer: Frame, line: int) -> bool:
    """Between the place and the hot frame: a periodic ``if`` or an ``except`` block; or
    before it in the hot loop, an ``if ...: continue`` that skips it but periodically."""
    inside = local_frames(frames)
    start = next((i for i, f in enumerate(inside) if f is outer), -1)
    if any(f.kind is FrameKind.EXCEPT for f in inside[start + 1 :]):
        return True
    if skip_before(frames, outer, line, is_periodic_condition) is not None:
        return True
    return guard_between(frames, outer, lambda node, _: is_periodic_guard(node.test)) is not None


@detector("TD704", depth=Depth.LINT)
class CompileInLoop(LintRule):
    """``torch.compile`` of the same object on every iteration of a loop."""

    requires = ("compile",)
    call_names = frozenset({"compile"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._calls: list[tuple[ast.Call, tuple[Frame, ...]]] = []
        self._targets: dict[int, ast.expr] = {}

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], (ast.Name, ast.Attribute)):
            self._targets[id(node.value)] = node.targets[0]

    def visit_call(self, node: ast.Call) -> None:
        if self.ctx.is_call_to(node, "torch.compile") and any(
            f.kind is FrameKind.LOOP for f in local_frames(self.ctx.frames)
        ):
            self._calls.append((node, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        for call, frames in self._calls:
            subject = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg == "model"), None)
            )
            if not isinstance(subject, (ast.Name, ast.Attribute)):
                continue  # a decorator factory, or a fresh object: compiled once each
            loop = enclosing_loops(self.ctx, frames)[0]
            if _compiled_once(frames, loop) or self._rebound_in_loop(subject, loop, call):
                continue
            self._report(call, loop, self.ctx.segment(subject))

    def _rebound_in_loop(self, subject: ast.expr, loop: Loop, call: ast.Call) -> bool:
        """Whether each iteration compiles a different object (a loop variable, or one
        built in the loop before the compile)."""
        text = self.ctx.segment(subject)
        # Names in the subject (`self.layers[i].forward`, `blocks[name]`): indexed by the
        # loop variable, each iteration compiles a different object.
        used = {n.id for n in ast.walk(subject) if isinstance(n, ast.Name)}
        loops = [loop]
        while loops:
            current = loops.pop()
            node = current.node
            if not isinstance(node, ast.While):
                bound = _target_texts(node.target)
                if text in bound or (used - {text}) & bound:
                    return True
            loops.extend(current.children)
        for item in loop.items:
            statement = item.node
            if (
                isinstance(statement, (ast.Assign, ast.AnnAssign))
                and statement.value is not call
                and item.line <= call.lineno
            ):
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                )
                if any(text in _target_texts(t) or used & _target_texts(t) for t in targets):
                    return True  # `layer = self.blocks[i]`, then `torch.compile(layer.forward)`
        return False

    def _report(self, call: ast.Call, loop: Loop, subject: str) -> None:
        target = self._targets.get(id(call))
        rebinds = target is not None and self.ctx.segment(target) == subject
        hint = (
            f"Compile once, before the loop (`{subject} = torch.compile({subject})`), and "
            "use the compiled module inside it."
        )
        if rebinds:
            message = (
                f"`{subject} = torch.compile({subject})` at line {call.lineno} runs on every "
                f"iteration of the loop at line {loop.line}: from the second iteration on it "
                "compiles the already compiled model again (a new trace each time; on torch "
                f"2.13 the result is no longer an `nn.Module`, so `{subject}.train()`, "
                "`.eval()` and `.state_dict()` fail)"
            )
        else:
            message = (
                f"`torch.compile({subject})` at line {call.lineno} runs on every iteration of "
                f"the loop at line {loop.line}, building a new compiled wrapper each time: "
                "dynamo's cache usually spares a full recompilation, but every iteration "
                "pays the wrapper and guard set-up again, and any changed argument "
                "recompiles (8 times per function, then dynamo falls back to eager)"
            )
        self.report(
            call,
            message,
            fix_hint=hint,
            evidence={"loop_line": loop.line},
            severity=None if rebinds else Severity.WARNING,
        )


def _target_texts(target: ast.expr) -> set[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_texts(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_texts(target.value)
    return {ast.unparse(target)}


def _compiled_once(frames: tuple[Frame, ...], loop: Loop) -> bool:
    """An ``if`` that runs the compile once (``if compiled is None``, ``if epoch == 0``),
    or an ``except`` fallback."""
    inside = local_frames(frames)
    start = next((i for i, f in enumerate(inside) if f is loop.frame), -1)
    if any(f.kind is FrameKind.EXCEPT for f in inside[start + 1 :]):
        return True
    return guard_between(frames, loop.frame, lambda node, _: _is_once_test(node.test)) is not None


def _is_once_test(test: ast.expr) -> bool:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True  # if not compiled:
    if isinstance(test, ast.BoolOp):
        return any(_is_once_test(value) for value in test.values)
    if isinstance(test, ast.Compare):
        return any(
            isinstance(op, (ast.Eq, ast.Is, ast.IsNot, ast.NotIn, ast.In)) for op in test.ops
        )
    return is_periodic_guard(test)
