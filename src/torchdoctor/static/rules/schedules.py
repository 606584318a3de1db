"""Schedulers stepped at the wrong time, as real code arranges it.

TD615 epoch-scheduler-stepped-per-batch: an epoch-based schedule stepped every batch.

``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``ReduceLROnPlateau`` and
``CosineAnnealingLR(T_max=epochs)`` count epochs; stepped inside the loop over a
``DataLoader`` (or from an event handler that runs every iteration) they decay the
learning rate hundreds of times too fast. Schedules built for steps (``OneCycleLR``,
warm-ups, ``StepLR(step_size=30000)``) stay quiet.

TD607 scheduler-before-optimizer, from event handlers: a scheduler stepped by a handler
of ``ITERATION_STARTED``/``EPOCH_STARTED`` runs before the optimizer step it follows.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Confidence, Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.dataloader import iterated, loader_of
from torchdoctor.static.analysis.loops import guard_between, is_periodic_guard
from torchdoctor.static.analysis.step_sequences import Action, Kind, sequences
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, Loop, ModuleScope
from torchdoctor.static.training import EventKind, loop_events
from torchdoctor.static.values import constructor_of

_PREFIX = torchapi.LR_SCHEDULER_PREFIX
_EPOCH_SCHEDULES = torchapi.EPOCH_SCHEDULERS
_LARGEST_EPOCH_COUNT = 1000  # a step size or milestone above this counts iterations
_ITERATION_EVENTS = ("ITERATION_COMPLETED", "ITERATION_STARTED")
_ITERATION_WORDS = ("len(", "*", "step", "iter", "batch", "update")


@detector("TD615", depth=Depth.LINT)
class EpochSchedulerSteppedPerBatch(LintRule):
    """An epoch-based LR scheduler stepped inside the per-batch loop or handler."""

    requires = ("lr_scheduler",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        reported: set[int] = set()
        for body in sequences(ctx):
            for action in body.actions:
                if action.kind is not Kind.SCHEDULER or id(action.node) in reported:
                    continue
                where = self._per_batch(body.loop, body.scope, action)
                if where is None:
                    continue
                schedule = self._epoch_schedule(action)
                if schedule is not None:
                    reported.add(id(action.node))
                    self._report(action, schedule, where)

    def _per_batch(self, loop: Loop | None, scope: Scope, action: Action) -> str | None:
        """Where the step runs once per batch: the loop over a loader, or a handler."""
        ctx = self.ctx
        if loop is not None:
            if (
                guard_between(
                    action.site.frames,
                    loop.frame,
                    lambda node, _body: is_periodic_guard(node.test) or _floors_the_rate(node.test),
                )
                is not None
            ):
                return None
            if not isinstance(loop.node, (ast.For, ast.AsyncFor)):
                return None
            source = iterated(ctx, loop.node.iter, loop.function)
            if loader_of(ctx, source, loop.function) is None and not ctx.is_in_family(
                source, torchapi.DATALOADER, loop.function
            ):
                return None
            return f"inside the loop over batches at line {loop.line}"
        if (
            isinstance(scope, FunctionScope)
            and guard_between(action.site.frames, None, lambda node, _body: True) is None
        ):
            for decorator in scope.node.decorator_list:
                text = ctx.segment(decorator)
                if any(event in text for event in _ITERATION_EVENTS):
                    return f"from the handler `{scope.name}`, which runs every iteration"
        return None

    def _epoch_schedule(self, action: Action) -> str | None:
        """The schedule's class name when it counts epochs, as far as its arguments show."""
        ctx = self.ctx
        target = action.target
        if target is None:
            return None
        built = constructor_of(ctx, target, action.scope)
        scope = action.scope
        if built is None:
            built, scope = self._passed_in(target, action.scope)
        if built is None:
            return None
        qualified = ctx.qualified_name(built.func, scope) or ""
        if not qualified.startswith(_PREFIX):
            return None
        name = qualified[len(_PREFIX) :]
        if name not in _EPOCH_SCHEDULES:
            return None
        where = _EPOCH_SCHEDULES[name]
        if where is None:
            return name
        argument = _argument(built, *where)
        return name if argument is not None and _counts_epochs(name, argument) else None

    def _passed_in(self, target: ast.expr, scope: Scope) -> tuple[ast.Call | None, Scope]:
        """The schedule a parameter receives from the file's callers, when they agree."""
        ctx = self.ctx
        if not isinstance(target, ast.Name) or scope is None:
            return None, scope
        found = ctx.lookup(target, scope)
        if found is None or found[0].kind is not BindingKind.PARAMETER:
            return None, scope
        args = scope.node.args
        names = [a.arg for a in args.posonlyargs + args.args]
        position = names.index(target.id) if target.id in names else None
        if position is not None and scope.self_name is not None:
            position -= 1
        built: list[tuple[ast.Call, Scope]] = []
        for caller, item in ctx.callers(scope):
            call = item.node
            assert isinstance(call, ast.Call)
            argument = next((k.value for k in call.keywords if k.arg == target.id), None)
            if argument is None and position is not None and 0 <= position < len(call.args):
                argument = call.args[position]
            made = None if argument is None else constructor_of(ctx, argument, caller)
            if made is None:
                return None, scope
            built.append((made, caller))
        return built[0] if len(built) == 1 else (None, scope)

    def _report(self, action: Action, schedule: str, where: str) -> None:
        ctx = self.ctx
        self.report(
            action.node,
            f"`{ctx.segment(action.node)}` at line {action.line} steps a `{schedule}` "
            f"{where}: `{schedule}` counts epochs, so the learning rate decays once per "
            "batch instead of once per epoch (hundreds of times too fast) and training "
            "stalls at a tiny learning rate",
            fix_hint="Step it once per epoch, after the loop over batches (or use a "
            "per-step schedule such as `OneCycleLR` and size it in batches).",
            evidence={"schedule": schedule},
        )


def _floors_the_rate(test: ast.expr) -> bool:
    """A guard that compares the optimizer's current learning rate with a bound
    (``if get_learning_rate(optimizer) > args.minimum_lr:``,
    ``if optimizer.param_groups[0]["lr"] > 1e-6:``): the author steps the schedule every
    batch on purpose and stops it at a floor, so the decay per batch is the design."""
    for node in ast.walk(test):
        if not isinstance(node, ast.Compare):
            continue
        for operand in (node.left, *node.comparators):
            if _reads_current_rate(operand):
                return True
    return False


def _reads_current_rate(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Subscript):
        key = expr.slice
        if isinstance(key, ast.Constant) and key.value == "lr":
            return True  # param_groups[0]["lr"]
        return _reads_current_rate(expr.value)  # scheduler.get_last_lr()[0]
    if isinstance(expr, ast.Call):
        tokens = torchapi.name_tokens(last_name(expr.func))
        return "lr" in tokens or {"learning", "rate"} <= set(tokens)
    return False


def _argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    found = next((k.value for k in call.keywords if k.arg == name), None)
    if (
        found is None
        and len(call.args) > position
        and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1])
    ):
        found = call.args[position]
    return found


def _counts_epochs(schedule: str, value: ast.expr) -> bool:
    """Whether a schedule's length argument reads as epochs (small numbers, ``epochs``)."""
    if schedule == "ExponentialLR":
        return (
            isinstance(value, ast.Constant)
            and isinstance(value.value, float)
            and value.value <= 0.99
        )
    text = ast.unparse(value).lower()
    if any(word in text for word in _ITERATION_WORDS):
        return False  # epochs * len(loader), total_steps, args.decay_iters: counts batches
    if "epoch" in text:
        return True
    if schedule == "CosineAnnealingLR":
        return False  # T_max=200 may count epochs or steps: only a name says which
    elements = getattr(value, "elts", [value])
    numbers = [
        e.value
        for e in elements
        if isinstance(e, ast.Constant)
        and isinstance(e.value, int)
        and not isinstance(e.value, bool)
    ]
    return bool(numbers) and len(numbers) == len(elements) and max(numbers) <= _LARGEST_EPOCH_COUNT


_STARTED_EVENTS = ("ITERATION_STARTED", "EPOCH_STARTED")
# Calls that register a handler for an event key: `add_event_handler(key, fn)`, ...
_REGISTRATIONS = frozenset({"add_event_handler", "register", "subscribe", "on", "connect"})


@detector("TD607", depth=Depth.LINT)
class SchedulerStepFromStartHandler(LintRule):
    """A scheduler stepped by an event handler that runs before the training step.

    A handler is a function registered for an event key (decorated with
    ``@engine.on(key)``, or passed to ``add_event_handler(key, fn)``). Where the file
    itself fires the key in a loop (``engine.fire("epoch_started", epoch)``), the handler
    runs at that call: before the loop's first optimizer step, the schedule advances
    before any update. Where a library fires it (ignite), the key's name tells:
    ``ITERATION_STARTED``/``EPOCH_STARTED`` run before the step. Loop bodies are
    :mod:`.optimizer`'s TD607 detector."""

    requires = ("step(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        handlers = self._handlers(module)  # first: most files register no handler
        if not handlers:
            return
        bodies = sequences(ctx)
        if not any(a.kind is Kind.STEP for body in bodies for a in body.actions):
            return
        for body in bodies:
            if body.loop is not None or body.scope is None or id(body.scope) not in handlers:
                continue
            for action in body.actions:
                if action.kind is Kind.STEP:
                    break  # the handler steps the optimizer itself first
                if (
                    action.kind is Kind.SCHEDULER
                    and guard_between(action.site.frames, None, lambda node, _body: True) is None
                ):
                    self._judge(action, body.scope, handlers[id(body.scope)], module)
                    break

    def _handlers(self, module: ModuleScope) -> dict[int, str]:
        """Functions registered for an event key, with the key's source text."""
        ctx = self.ctx
        found: dict[int, str] = {}
        for function in module.functions:
            for decorator in function.node.decorator_list:
                if isinstance(decorator, ast.Call) and decorator.args:
                    key = _key_text(ctx, decorator.args[0])
                    if key is not None:
                        found[id(function)] = key
        for _scope, items in module.bodies():
            for item in items:
                call = item.node
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr in _REGISTRATIONS
                    and len(call.args) >= 2
                    and isinstance(call.args[1], ast.Name)
                ):
                    key = _key_text(ctx, call.args[0])
                    named = ctx.function_index.get(call.args[1].id)
                    if key is not None and named is not None:
                        found[id(named)] = key
        return found

    def _judge(self, action: Action, handler: FunctionScope, key: str, module: ModuleScope) -> None:
        seen_steps = False
        for site, loop in self._fire_sites(key, module):
            steps = [
                e.line
                for e in loop_events(self.ctx, loop, forwards=False)
                if e.kind is EventKind.OPTIMIZER_STEP
            ]
            if not steps:
                continue  # the loop steps through a callable lint cannot follow
            seen_steps = True
            if min(steps) > site.lineno:
                self._report_fired(action, handler, key, site, loop, min(steps))
                return
        if not seen_steps and any(event in key for event in _STARTED_EVENTS):
            self._report(action, handler, key)  # fired where the step is out of sight

    def _fire_sites(self, key: str, module: ModuleScope) -> list[tuple[ast.Call, Loop]]:
        """Calls in loops of the file that pass the key (not registering a handler),
        with their innermost loop."""
        ctx = self.ctx
        sites = []
        for loop in module.all_loops:
            for item in loop.items:
                call = item.node
                if (
                    loop.is_direct(item)
                    and isinstance(call, ast.Call)
                    and not (
                        isinstance(call.func, ast.Attribute) and call.func.attr in _REGISTRATIONS
                    )
                    and any(_key_text(ctx, arg) == key for arg in call.args)
                ):
                    sites.append((call, loop))
        return sites

    def _report(self, action: Action, handler: FunctionScope, event: str) -> None:
        ctx = self.ctx
        self.report(
            action.node,
            f"`{ctx.segment(action.node)}` at line {action.line} runs in `{handler.name}`, a "
            f"handler of `{event[:60]}`, which fires before the training step of its "
            "iteration or epoch: the scheduler steps before `optimizer.step()`, so the first "
            "value of the schedule is skipped and every step runs one value ahead",
            fix_hint="Step the scheduler from an `ITERATION_COMPLETED` (per-step schedules) "
            "or `EPOCH_COMPLETED` (per-epoch schedules) handler.",
            confidence=Confidence.HIGH
            if action.target is not None
            and constructor_of(ctx, action.target, action.scope) is not None
            else Confidence.MEDIUM,
        )

    def _report_fired(
        self,
        action: Action,
        handler: FunctionScope,
        key: str,
        site: ast.Call,
        loop: Loop,
        step_line: int,
    ) -> None:
        ctx = self.ctx
        fire = ctx.segment(site)
        fire = fire if len(fire) <= 50 and "\n" not in fire else ctx.segment(site.func) + "(...)"
        self.report(
            action.node,
            f"`{ctx.segment(action.node)}` at line {action.line} runs in `{handler.name}`, "
            f"the handler of {key[:40]} that `{fire}` at line {site.lineno} runs before "
            f"`optimizer.step()` (line {step_line}) in the loop at line {loop.line}: on the "
            "first pass the schedule advances before any update, so PyTorch skips its first "
            'learning-rate value and warns "Detected call of `lr_scheduler.step()` before '
            '`optimizer.step()`"',
            fix_hint="Step the scheduler from a handler of an event fired after the "
            "optimizer step (the end of the iteration or epoch).",
            evidence={"fired_at": site.lineno, "optimizer_step_line": step_line},
        )


def _key_text(ctx: FileContext, expr: ast.expr) -> str | None:
    """An event key's source text: a string constant or a dotted constant
    (``Events.EPOCH_STARTED``, also filtered: ``Events.ITERATION_STARTED(every=10)``);
    ``None`` for anything else."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return repr(expr.value)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, (ast.Name, ast.Attribute)):
        return ctx.segment(expr)
    return None
