"""Optimizer rules: TD607 scheduler-before-optimizer, TD610 layer-replaced-after-optimizer.

TD607 compares, in each training loop, the first ``scheduler.step()`` with the first
optimizer step (its own or a helper's). TD610 reads a function's items in source order: a
layer with parameters assigned onto a model after an optimizer was built from that model's
``parameters()`` is never updated, unless a new optimizer or ``add_param_group`` follows,
or the optimizer never steps again (a local one whose last use is behind the replacement).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import method_call
from torchdoctor.static.analysis.helper_effects import (
    helper_optimizer_roots,
    helper_replacements,
    module_kept,
)
from torchdoctor.static.analysis.loops import (
    enclosing_loops,
    innermost_loop,
    local_frames,
    loop_bound_names,
)
from torchdoctor.static.analysis.optimized import covers, model_path, optimizer_roots
from torchdoctor.static.analysis.optimizer_use import used_after
from torchdoctor.static.branches import exclusive
from torchdoctor.static.context import Scope
from torchdoctor.static.frameworks import framework_owned
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, Loop, ModuleScope
from torchdoctor.static.training import (
    Event,
    EventKind,
    function_events,
    loop_events,
)

# --- TD607 -------------------------------------------------------------------------------

# Words of a method whose answer is fixed for the run (an option, an environment check),
# not state the training moves on.
_FIXED_PREDICATES = frozenset(
    {"get", "available", "initialized", "enabled", "exists", "startswith"}
)


@detector("TD607", depth=Depth.LINT)
class SchedulerBeforeOptimizer(LintRule):
    """``scheduler.step()`` that runs before the first ``optimizer.step()`` of a loop."""

    requires = ("step",)

    def leave_loop(self, loop: Loop) -> None:
        if loop.parent is not None:
            return  # the outermost loop sees the nested ones: report each place once
        ctx = self.ctx
        if framework_owned(ctx, loop.function):
            return  # the framework steps the optimizer and the scheduler around this code
        events = loop_events(ctx, loop, forwards=False)
        schedules = [e for e in events if e.kind is EventKind.SCHEDULER_STEP]
        if not schedules:
            return
        steps = [(e.item, e.line) for e in events if e.kind is EventKind.OPTIMIZER_STEP]
        steps += self._helper_steps(loop)
        if not steps:
            return
        first, first_line = min(steps, key=lambda s: (s[1], getattr(s[0].node, "col_offset", 0)))
        for event in schedules:
            if event.line > first_line or not self._advances(event, loop.function):
                continue
            if self._skips_first_pass(event.item, loop):
                continue
            self._report(
                event.item, first, first_line, loop, per_update=self._per_update(event.item, first)
            )

    def leave_module(self, module: ModuleScope) -> None:
        """A function run once per pass of a loop (``run_epoch()`` called by the epoch
        loop) whose body steps the scheduler before its own loop steps the optimizer: the
        first call advances the schedule before any update, as in a single loop."""
        ctx = self.ctx
        for function in module.functions:
            if not any(method_call(i.node, "step") and _unconditional(i) for i in function.items):
                continue  # no `x.step()` outside loops and ifs: nothing to read (most)
            events = function_events(ctx, function, forwards=False)
            schedules = [
                e for e in events if e.kind is EventKind.SCHEDULER_STEP and _unconditional(e.item)
            ]
            if not schedules or framework_owned(ctx, function):
                continue
            caller_loop = self._calling_loop(function)
            if caller_loop is None:
                continue
            steps = [(e.item, e.line) for e in events if e.kind is EventKind.OPTIMIZER_STEP]
            steps += [
                (item, item.line) for loop in function.loops for item, _ in self._helper_steps(loop)
            ]
            if not steps:
                continue
            first, first_line = min(steps, key=lambda s: s[1])
            for event in schedules:
                if event.line < first_line and self._advances(event, function):
                    self._report(
                        event.item,
                        first,
                        first_line,
                        caller_loop,
                        function,
                        per_update=self._per_update(event.item, first),
                    )

    def _calling_loop(self, function: FunctionScope) -> Loop | None:
        """A loop of this file that calls ``function`` on each of its passes."""
        for _, item in self.ctx.callers(function):
            loops = enclosing_loops(self.ctx, item.frames)
            if loops:
                return loops[-1]
        return None

    def _advances(self, event: Event, scope: Scope) -> bool:
        """A scheduler step that advances the schedule by itself: not
        ``ReduceLROnPlateau.step(metric)`` (a metric passed, or a plateau scheduler)."""
        call = event.node
        if isinstance(call, ast.Call) and call.args:
            return False
        type_name = self.ctx.instance_type(event.target, scope) if event.target else None
        return not (type_name and type_name.endswith("ReduceLROnPlateau"))

    def _helper_steps(self, loop: Loop) -> list[tuple[Item, int]]:
        """Calls in the loop to functions of this file that step an optimizer."""
        ctx = self.ctx
        found = []
        for item in loop.items:
            if not isinstance(item.node, ast.Call):
                continue
            helper = ctx.resolve_local_call(item.node, loop.function)
            if (
                helper is not None
                and helper is not loop.function
                and any(
                    e.kind is EventKind.OPTIMIZER_STEP
                    for e in function_events(ctx, helper, forwards=False)
                )
            ):
                found.append((item, item.line))
        return found

    def _per_update(self, schedule: Item, step: Item) -> bool:
        """Whether the schedule steps once per optimizer update: the scheduler step and the
        optimizer step (or the call of a helper that steps once, outside any loop of its
        own) share their innermost loop. The schedule then runs one update ahead, a
        shift of one step in many; stepped once per epoch around an epoch of updates, it
        runs a whole epoch ahead."""
        if innermost_loop(schedule) is not innermost_loop(step):
            return False
        call = step.node
        ctx = self.ctx
        helper = (
            ctx.resolve_local_call(call, ctx.function_of(step.frames))
            if isinstance(call, ast.Call)
            else None
        )
        if helper is None:
            return True  # the optimizer's own step
        return all(
            innermost_loop(e.item) is None
            for e in function_events(ctx, helper, forwards=False)
            if e.kind is EventKind.OPTIMIZER_STEP
        )

    def _skips_first_pass(self, item: Item, loop: Loop) -> bool:
        """Inside an ``if`` that tests a loop counter (``if epoch > 0:``), or state the run
        moves on: a method asked each pass (auto_LiRPA decays the rate only once
        ``eps_scheduler.reached_max_eps()``, epochs of updates later)."""
        bound = loop_bound_names(loop)
        for frame in loop.inner_frames(item):
            if frame.kind not in (FrameKind.IF_BODY, FrameKind.IF_ELSE) or not isinstance(
                frame.node, ast.If
            ):
                continue
            test = frame.node.test
            if any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(test)):
                return True
            if any(
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and not _FIXED_PREDICATES.intersection(torchapi.name_tokens(n.func.attr))
                for n in ast.walk(test)
            ):
                return True
        return False

    def _report(
        self,
        schedule: Item,
        step: Item,
        step_line: int,
        loop: Loop,
        through: FunctionScope | None = None,
        *,
        per_update: bool = False,
    ) -> None:
        ctx = self.ctx
        scheduler = ctx.segment(schedule.node)
        stepped = ctx.segment(step.node)
        stepped = stepped if len(stepped) <= 40 and "\n" not in stepped else "optimizer.step()"
        where = (
            f"in the loop at line {loop.line}"
            if through is None
            else f"in `{through.name}`, which the loop at line {loop.line} calls on every pass"
        )
        if per_update:
            consequence = (
                "the scheduler steps once per update, so the schedule runs one update ahead "
                "(the first update already uses its second value): a shift of one step, "
                'harmless over a long schedule, but PyTorch warns "Detected call of '
                '`lr_scheduler.step()` before `optimizer.step()`"'
            )
        else:
            consequence = (
                "on the first pass the schedule advances before any update, so PyTorch "
                'skips its first learning-rate value and warns "Detected call of '
                '`lr_scheduler.step()` before `optimizer.step()`"'
            )
        self.report(
            schedule.node,
            f"`{scheduler}` at line {schedule.line} runs before `{stepped}` (line {step_line}) "
            f"{where}: {consequence}",
            fix_hint="Call the scheduler after `optimizer.step()`: at the end of the epoch for "
            "a per-epoch schedule, right after the optimizer for a per-step one.",
            evidence={"optimizer_step_line": step_line, "loop_line": loop.line},
            severity=Severity.INFO if per_update else None,
        )


def wrapped_module(value: ast.expr) -> ast.expr | None:
    """The module a ``DistributedDataParallel(...)``/``DataParallel(...)`` call wraps."""
    if not isinstance(value, ast.Call):
        return None
    if value.args:
        return value.args[0]
    return next((k.value for k in value.keywords if k.arg == "module"), None)


def _unconditional(item: Item) -> bool:
    """Straight in its function's body: no loop or ``if`` around it."""
    return not any(
        f.kind in (FrameKind.LOOP, FrameKind.IF_BODY, FrameKind.IF_ELSE)
        for f in local_frames(item.frames)
    )


# --- TD610 -------------------------------------------------------------------------------


@detector("TD610", depth=Depth.LINT)
class LayerReplacedAfterOptimizer(LintRule):
    """``model.fc = nn.Linear(...)`` after ``optimizer = SGD(model.parameters())``."""

    requires = ("parameters(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for scope, items in module.bodies():
            self._check(scope, items)

    def _check(self, scope: Scope, items: list[Item]) -> None:
        ctx = self.ctx
        optimizers: list[tuple[Item, list[str]]] = []
        for item in items:
            node = item.node
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                roots = optimizer_roots(ctx, node.value, scope)
                if not roots and isinstance(node.value, ast.Call):
                    roots = helper_optimizer_roots(ctx, node.value, scope)
                if roots:
                    optimizers.append((item, roots))
        if not optimizers:
            return
        replacements: list[tuple[Item, str, str]] = []
        rebinds: list[tuple[Item, str]] = []
        regroups: list[Item] = []
        for item in items:
            node = item.node
            if item.line < optimizers[0][0].line:
                continue
            if method_call(node, "add_param_group"):
                regroups.append(item)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and len(node.args) == 3
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                self._replacement(
                    item,
                    f"{ctx.segment(node.args[0])}.{node.args[1].value}",
                    node.args[2],
                    scope,
                    replacements,
                )
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        rebinds.append((item, target.id))
                    elif isinstance(target, (ast.Attribute, ast.Subscript)):
                        self._replacement(
                            item, model_path(ctx, target), node.value, scope, replacements
                        )
            elif isinstance(node, ast.Call):
                for path, what, helper in helper_replacements(
                    ctx, node, scope, self._new_parameters
                ):
                    replacements.append((item, path, f"{what}` in `{helper.name}()"))
        for replacement in replacements:
            self._judge(scope, replacement, optimizers, rebinds, regroups)

    def _replacement(
        self,
        item: Item,
        path: str,
        value: ast.expr,
        scope: Scope,
        found: list[tuple[Item, str, str]],
    ) -> None:
        itself = module_kept(self.ctx, value, scope)
        if itself is not value and model_path(self.ctx, itself) == path:
            return  # `self.gate = self.gate.to(device)`: the same module, moved or compiled
        what = self._new_parameters(value, scope)
        if what is not None:
            found.append((item, path, what))

    def _new_parameters(self, value: ast.expr, scope: Scope, depth: int = 0) -> str | None:
        """The class of a new module with parameters (or ``nn.Parameter``), else ``None``."""
        ctx = self.ctx
        if isinstance(value, ast.Call) and ctx.is_call_to(value, "torch.compile", scope=scope):
            # A compiled module runs its original's own parameters: those are what is new.
            inner = value.args[0] if value.args else None
            return None if inner is None else self._new_parameters(inner, scope, depth + 1)
        type_name = ctx.instance_type(value, scope)
        if type_name is None or torchapi.holds_no_parameters(type_name) or depth > 3:
            return None
        if type_name in torchapi.PARAMETER:
            return "nn.Parameter"
        if not ctx.is_family(type_name, torchapi.MODULE):
            return None
        if type_name in torchapi.WRAPPER_NAMES:
            # DDP and DataParallel hold the wrapped module's own parameters: wrapping an
            # existing model adds none, wrapping a module built right there does.
            inner = wrapped_module(value)
            if not isinstance(inner, ast.Call):
                return None
            return self._new_parameters(inner, scope, depth + 1)
        if (
            type_name == "torch.nn.Sequential"
            and isinstance(value, ast.Call)
            and value.args
            and all(self._new_parameters(a, scope, depth + 1) is None for a in value.args)
        ):
            return None
        return type_name.rpartition(".")[2]

    def _judge(
        self,
        scope: Scope,
        replacement: tuple[Item, str, str],
        optimizers: list[tuple[Item, list[str]]],
        rebinds: list[tuple[Item, str]],
        regroups: list[Item],
    ) -> None:
        ctx = self.ctx
        item, path, what = replacement
        covering = [
            (o, root)
            for o, roots in optimizers
            for root in roots
            if covers(root, path) and not exclusive(ctx, o, item)
        ]
        before = [(o, root) for o, root in covering if o.line < item.line]
        if not before:
            return
        optimizer, root = before[-1]
        name = root.partition(".")[0].partition("[")[0]
        if any(optimizer.line < r.line < item.line and n == name for r, n in rebinds):
            return  # the model itself was rebuilt in between
        if any(o.line > item.line for o, _ in covering) or any(
            r.line > item.line for r in regroups
        ):
            return  # a new optimizer, or add_param_group, takes the new parameters
        if not used_after(ctx, scope, optimizer, item):
            return  # the optimizer's last step is behind the replacement: it misses nothing
        self._report(item, path, what, optimizer, root)

    def _report(self, item: Item, path: str, what: str, optimizer: Item, root: str) -> None:
        self.report(
            item.node,
            f"`{path}` gets a new `{what}` at line {item.line}, after the optimizer at line "
            f"{optimizer.line} was built from `{root}.parameters()`: the optimizer holds the "
            "old parameters, so the new ones receive gradients but are never updated and "
            "keep their initial values",
            fix_hint="Replace the layer before building the optimizer, or build the optimizer "
            "again (or call `optimizer.add_param_group(...)`) after replacing it.",
            evidence={"optimizer_line": optimizer.line},
        )
