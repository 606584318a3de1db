"""Memory rules: TD701 figures-never-closed, TD702 empty-cache-in-loop.

The speed rules of the same topic (TD703, TD704, TD705) live in :mod:`.speed`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from torchdoctor.findings import Applicability, Depth, Finding, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.callers import never_run
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.loops import (
    at_most_passes,
    enclosing_loops,
    guard_between,
    is_periodic_condition,
    is_periodic_guard,
    local_frames,
    skip_before,
    steps_every_iteration,
)
from torchdoctor.static.branches import enclosing_blocks
from torchdoctor.static.context import FileContext
from torchdoctor.static.names import own_nodes
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FrameKind, FunctionScope, Loop

_PYPLOT = "matplotlib.pyplot"
_FIGURE_MAKERS = (f"{_PYPLOT}.figure", f"{_PYPLOT}.subplots", f"{_PYPLOT}.subplot_mosaic")
# Calls a figure may be passed to without being closed; handing it to any other call
# (a helper that saves and closes it, SummaryWriter.add_figure) is trusted.
_KEEPERS = frozenset(
    {
        "print",
        "len",
        "isinstance",
        "append",
        "extend",
        "Image",
        "log_figure",
        "log",
        "savefig",
        "show",
    }
)


@detector("TD701", depth=Depth.LINT)
class FiguresNeverClosed(LintRule):
    """A pyplot figure created on every pass of a loop that never closes one."""

    requires = ("pyplot",)
    call_names = frozenset({"figure", "subplots", "subplot_mosaic", "close", "show"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._made: list[tuple[ast.Call, tuple[Frame, ...]]] = []
        self._closes: list[tuple[Frame, ...]] = []
        self._shows: list[FunctionScope | None] = []
        self._figure_names: dict[int, str] = {}
        self._bound: dict[int, set[str]] = {}

    def visit_Assign(self, node: ast.Assign) -> None:
        value, target = node.value, node.targets[0]
        if not isinstance(value, ast.Call) or len(node.targets) != 1:
            return
        self._bound[id(value)] = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if isinstance(target, (ast.Tuple, ast.List)) and target.elts:
            target = target.elts[0]  # fig, ax = plt.subplots()
        if isinstance(target, ast.Name):
            self._figure_names[id(value)] = target.id

    def visit_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, *_FIGURE_MAKERS):
            looped = any(f.kind is FrameKind.LOOP for f in local_frames(ctx.frames))
            if looped and not _reuses_a_numbered_figure(node):
                self._made.append((node, ctx.frames))
        elif ctx.is_call_to(node, f"{_PYPLOT}.close"):
            self._closes.append(ctx.frames)
        elif ctx.is_call_to(node, f"{_PYPLOT}.show"):
            self._shows.append(ctx.function)

    def leave_module(self, module: object) -> None:
        for call, frames in self._made:
            loops = enclosing_loops(self.ctx, frames)
            outermost = loops[-1]
            if any(outermost.frame in closed for closed in self._closes):
                continue
            function = self.ctx.function_of(frames)
            if function in self._shows:
                continue  # figures meant to stay open until plt.show()
            if _made_once(frames, outermost, self._bound.get(id(call), set())):
                continue  # `if ax is None: fig, ax = plt.subplots()`: the first pass only
            if self._never_made(call, function) or _ends_the_program_after(
                self.ctx, outermost.node, call
            ):
                continue
            name = self._figure_names.get(id(call))
            if name is not None and _handed_off(outermost, name, function):
                continue
            during = self._runs_during_training(outermost, function, 0)
            self._report(call, outermost, name, during, _few_passes(self.ctx, loops))

    def _never_made(self, call: ast.Call, function: FunctionScope | None) -> bool:
        """The figure sits in the arm of an ``if`` that a switch bound once to a constant
        never takes (Neural-Scene-Flow-Fields' ``TEST = False`` then ``if TEST:``)."""
        scope = function.node if function is not None else self.ctx.tree
        key = ("never-run", id(scope))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = never_run(own_nodes(scope))
        return id(call) in self.ctx.memo[key]  # type: ignore[operator]

    def _runs_during_training(
        self, loop: Loop | None, function: FunctionScope | None, depth: int
    ) -> bool:
        """Whether the figures' loop trains, or runs inside something that does: a loop of
        this file that trains around a call of its function (followed up three callers),
        or a framework hook run every step or epoch (``on_train_epoch_end``)."""
        ctx = self.ctx
        if loop is not None and _trains(ctx, loop):
            return True
        if function is None:
            return False
        if _PER_STEP_HOOK.search(function.name):
            return True
        for scope, item in ctx.callers(function):
            loops = enclosing_loops(ctx, item.frames)
            if loops and _trains(ctx, loops[-1]):
                return True
            caller = scope if isinstance(scope, FunctionScope) else None
            if (
                depth < 3
                and caller is not function
                and (self._runs_during_training(None, caller, depth + 1))
            ):
                return True
        return False

    def _report(
        self, call: ast.Call, loop: Loop, name: str | None, during: bool, passes: int | None
    ) -> None:
        ctx = self.ctx
        pyplot = ctx.segment(call.func.value) if isinstance(call.func, ast.Attribute) else "plt"
        message = (
            f"`{ctx.segment(call.func)}()` at line {call.lineno} creates a new figure on every "
            f"pass of the loop at line {loop.line}, and nothing in the loop closes it: pyplot "
            "keeps every figure alive until `plt.close()`, so memory grows with each "
            "iteration (several MB per figure; matplotlib warns after 20 open figures)"
        )
        if passes is not None:
            # A loop over a fixed list of a few settings: the figures are bounded; at
            # worst matplotlib's too-many-figures warning, not a leak.
            message += (
                f"; but the loops around it make at most {passes} passes (they iterate "
                "a fixed collection written in the code), so at most that many figures "
                "stay open"
            )
        elif not during:
            # A plotting helper or report script: its loop runs over a few results, once,
            # and the figures go when the program ends; not the leak a training run has.
            message += (
                "; this loop does no training and no training loop of this file runs it, "
                "so the figures add up only over its own passes"
            )
        self.report(
            call,
            message,
            fix_hint=f"Call `{pyplot}.close({name or ''})` inside the loop once the figure is "
            "saved or logged.",
            evidence={"loop_line": loop.line},
            severity=None if during and passes is None else Severity.INFO,
        )


# A loop nest that makes at most this many passes keeps few enough figures open that a
# maintainer leaves it (matplotlib itself warns from 20 open figures).
_FEW_PASSES = 32


def _few_passes(ctx: FileContext, loops: list[Loop]) -> int | None:
    """The most passes the loops around a figure make together, when every one of them
    iterates a fixed collection and the product is small; else ``None``."""
    total = 1
    for loop in loops:
        passes = at_most_passes(ctx, loop)
        if passes is None:
            return None
        total *= passes
    return total if total <= _FEW_PASSES else None


# What shows a loop trains (itself or through what it calls): a backward pass, an
# optimizer step, a framework's fit or step, a call of a `train...` function or method;
# or a header that counts epochs (`for epoch in range(args.epochs)`).
_TRAINING = re.compile(r"backward|autograd\.grad\b|\.step\(|\.fit\(|training_step|\btrain\w*\(")
_EPOCHS = re.compile(r"\bepoch")


def _trains(ctx: FileContext, loop: Loop) -> bool:
    """Whether the loop trains: its code shows a training step, or its own header runs
    over epochs. An `epoch` read in the body only (the epoch of a chosen checkpoint, in a
    report over trained models) shows nothing."""
    node = loop.node
    if _TRAINING.search(ctx.segment(node)):
        return True
    header = [node.test] if isinstance(node, ast.While) else [node.target, node.iter]
    return any(_EPOCHS.search(ctx.segment(part)) for part in header)


# Framework hooks called on every step, batch or epoch (Lightning, Keras-style callbacks).
_PER_STEP_HOOK = re.compile(r"^on_\w*(epoch|batch|step|validation)|_(step|epoch_end)$")


def _reuses_a_numbered_figure(call: ast.Call) -> bool:
    """``plt.figure(1)``, ``plt.figure("loss")``, ``num="loss"``: the same figure each time."""
    num = next((k.value for k in call.keywords if k.arg == "num"), None)
    if num is None and call.args and isinstance(call.func, (ast.Attribute, ast.Name)):
        last = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
        num = call.args[0] if last == "figure" else None
    return isinstance(num, ast.Constant) and isinstance(num.value, (int, str))


def _made_once(frames: tuple[Frame, ...], loop: Loop, bound: set[str]) -> bool:
    """The figure is made under ``if ax is None:`` (or ``if not fig:``) inside the loop,
    testing a name the same assignment binds: only the first pass makes one."""
    inside = False
    for frame in frames:
        if frame is loop.frame:
            inside = True
        elif inside and frame.kind is FrameKind.IF_BODY and isinstance(frame.node, ast.If):
            test = frame.node.test
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                tested = test.operand
            elif (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Is)
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None
            ):
                tested = test.left
            else:
                continue
            if isinstance(tested, ast.Name) and tested.id in bound:
                return True
    return False


# Calls that end the program.
_PROGRAM_EXITS = frozenset({"sys.exit", "os._exit"})
_BUILTIN_EXITS = frozenset({"exit", "quit"})


def _ends_the_program_after(ctx: FileContext, loop: ast.AST, call: ast.Call) -> bool:
    """A statement after the figure, in its own block or an enclosing one inside the loop,
    ends the program (a debug dump that plots, saves and calls ``sys.exit()``): the loop
    makes one figure at most."""
    return any(
        _exits(ctx, statement)
        for block, index in enclosing_blocks(loop, call)
        for statement in block[index + 1 :]
    )


def _exits(ctx: FileContext, statement: ast.stmt) -> bool:
    """``sys.exit(...)``, ``os._exit(...)``, ``exit()`` or ``quit()`` as a statement."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    func = statement.value.func
    if isinstance(func, ast.Name) and func.id in _BUILTIN_EXITS:
        return True
    return ctx.qualified_name(func) in _PROGRAM_EXITS


def _returned(function: FunctionScope | None, name: str) -> bool:
    """The function returns the list ``name`` (or a value built from it) to its caller."""
    if function is None:
        return False
    return any(
        isinstance(node, ast.Return)
        and node.value is not None
        and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
        for node in ast.walk(function.node)
    )


def _handed_off(loop: Loop, name: str, function: FunctionScope | None) -> bool:
    """Whether the loop passes the figure to a call that may close it, or collects it in
    a list the function returns (the caller owns the figures then)."""
    for item in loop.items:
        call = item.node
        if not isinstance(call, ast.Call):
            continue
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if not any(isinstance(a, ast.Name) and a.id == name for a in arguments):
            continue
        func = call.func
        last = last_name(func)
        if (
            last in ("append", "extend")
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and _returned(function, func.value.id)
        ):
            return True
        keeps = last in _KEEPERS or any(
            k.arg == "close" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in call.keywords
        )
        if not keeps:
            return True
    return False


_EMPTY_CACHE = torchapi.EMPTY_CACHE


@detector("TD702", depth=Depth.LINT)
class EmptyCacheInLoop(LintRule):
    """``torch.cuda.empty_cache()`` on every training step."""

    requires = ("empty_cache",)
    call_names = frozenset({"empty_cache"})

    def __init__(self, ctx: FileContext, sink: Callable[[Finding], None]) -> None:
        super().__init__(ctx, sink)
        self._calls: list[tuple[ast.Call, tuple[Frame, ...]]] = []
        self._statements: dict[int, ast.Expr] = {}

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Call):
            self._statements[id(node.value)] = node

    def visit_call(self, node: ast.Call) -> None:
        if self.ctx.is_call_to(node, *_EMPTY_CACHE) and any(
            f.kind is FrameKind.LOOP for f in local_frames(self.ctx.frames)
        ):
            self._calls.append((node, self.ctx.frames))

    def leave_module(self, module: object) -> None:
        ctx = self.ctx
        for call, frames in self._calls:
            hot = next(
                (loop for loop in enclosing_loops(ctx, frames) if steps_every_iteration(ctx, loop)),
                None,
            )
            if hot is None or _only_sometimes(frames, hot, call.lineno):
                continue
            self.report(
                call,
                f"`{ctx.segment(call.func)}()` at line {call.lineno} runs on every step of the "
                f"training loop at line {hot.line}: it hands the allocator's cached blocks "
                "back to the driver, so the next step allocates them again with "
                "`cudaMalloc`, which synchronises the device; it frees no memory that "
                "tensors still use",
                fix_hint="Remove the call from the loop: PyTorch's caching allocator reuses "
                "freed blocks. If memory runs out, find what keeps tensors alive, "
                "or empty the cache once between phases (after training, before "
                "evaluation).",
                evidence={"loop_line": hot.line},
                fix=self._deletion(call, frames),
            )

    def _deletion(self, call: ast.Call, frames: tuple[Frame, ...]) -> Fix | None:
        statement = self._statements.get(id(call))
        if statement is None or len(_block_of(frames, statement)) < 2:
            return None
        edit = self.ctx.delete_statement(statement)
        if edit is None:
            return None
        return Fix("Remove the `empty_cache()` call from the loop", (edit,), Applicability.UNSAFE)


def _only_sometimes(frames: tuple[Frame, ...], loop: Loop, line: int) -> bool:
    """Inside the loop, the call sits under a periodic or memory-pressure ``if`` (or after
    an ``if ...: continue`` that skips it but periodically), or in an ``except`` block
    (out-of-memory recovery)."""
    inside = local_frames(frames)
    start = next((i for i, f in enumerate(inside) if f is loop.frame), -1)
    if any(f.kind is FrameKind.EXCEPT for f in inside[start + 1 :]):
        return True
    if skip_before(frames, loop.frame, line, is_periodic_condition) is not None:
        return True
    return (
        guard_between(
            frames,
            loop.frame,
            lambda node, in_body: (
                is_periodic_guard(node.test)
                or _mentions_memory(node.test)
                or (in_body and (_never_true(node.test) or _reloads(node)))
            ),
        )
        is not None
    )


def _never_true(test: ast.expr) -> bool:
    """``if False:``, ``if resume and False:``: a branch switched off in the source."""
    operands = (
        test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    )
    return any(isinstance(o, ast.Constant) and not o.value for o in operands)


def _reloads(branch: ast.If) -> bool:
    """The branch reloads saved state (``torch.load``, ``load_state_dict``): recovery from
    a crashed step (DeCLIP's ``if resume:`` after a NaN loss goes back to the last
    checkpoint), which runs rarely, not on every step."""
    return any(
        isinstance(node, ast.Call) and "load" in torchapi.name_tokens(last_name(node.func))
        for statement in branch.body
        for node in ast.walk(statement)
    )


def _mentions_memory(test: ast.expr) -> bool:
    for node in ast.walk(test):
        name = (
            node.id
            if isinstance(node, ast.Name)
            else (node.attr if isinstance(node, ast.Attribute) else "")
        )
        if any(word in name.lower() for word in ("memory", "mem_", "oom", "reserved", "allocated")):
            return True
    return False


def _block_of(frames: tuple[Frame, ...], statement: ast.stmt) -> list[ast.stmt]:
    """The statement list holding ``statement`` (empty when the frames do not show it)."""
    frame = frames[-1]
    node = frame.node
    block = getattr(node, "orelse" if frame.kind is FrameKind.IF_ELSE else "body", [])
    return block if isinstance(block, list) and statement in block else []
