"""A learning-rate schedule started over during training: TD625 scheduler-rebuilt-in-loop.

A scheduler counts its own steps from the moment it is built, and building it sets the
optimizer's learning rate back to the start of the schedule. Built inside the loop that
trains (``for epoch ...: scheduler = StepLR(optimizer, 30)``), or in a helper that loop
calls every pass (``train_one_epoch(model, optimizer)`` building its own ``CosineAnnealingLR``),
a new scheduler replaces the last one on every pass: the schedule restarts each time, and
an epoch schedule stepped once per pass never moves at all. ``ReduceLROnPlateau`` built
anew forgets its best value and patience, and never reduces.

Quiet when the optimizer is built again in the same pass (a new stage with its own
optimizer and schedule), when the scheduler is built on one pass only (``if epoch ==
milestone:``, a new stage), when ``last_epoch=`` resumes the count, and for schedulers
built outside any loop that trains.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import keyword
from torchdoctor.static.analysis.loops import enclosing_loops, guard_between, trains
from torchdoctor.static.analysis.training_calls import training_call_sites
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, Item, Loop, ModuleScope


@detector("TD625", depth=Depth.LINT)
class SchedulerRebuiltInLoop(LintRule):
    """``scheduler = StepLR(optimizer, ...)`` on every pass of the training loop."""

    requires = ("lr_scheduler",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for scope, items in module.bodies():
            for item in items:
                assign = item.node
                if not isinstance(assign, ast.Assign) or not isinstance(assign.value, ast.Call):
                    continue
                node = assign.value
                schedule = self._schedule(node, scope)
                if schedule is None or keyword(node, "last_epoch") is not None:
                    continue
                optimizer = (
                    node.args[0]
                    if node.args
                    else getattr(keyword(node, "optimizer"), "value", None)
                )
                if not isinstance(optimizer, (ast.Name, ast.Attribute)):
                    continue
                loop = next(
                    (lp for lp in enclosing_loops(ctx, item.frames) if trains(ctx, lp)), None
                )
                names = {ast.unparse(t) for t in assign.targets}
                if loop is not None:
                    if (
                        not _rebuilt_in(optimizer, loop)
                        and not _stepped_in_inner_loop(names, loop.items, loop.node)
                        and not _on_one_pass(item, loop)
                    ):
                        self._report(node, schedule, f"every pass of the loop at line {loop.line}")
                elif (
                    isinstance(scope, FunctionScope)
                    and _is_parameter(optimizer, scope)
                    and not _stepped_in_inner_loop(names, scope.items, scope.node)
                ):
                    self._check_helper(node, schedule, item, scope)

    def _schedule(self, call: ast.Call, scope: Scope) -> str | None:
        """The scheduler class a call builds, when it is one of torch's."""
        qualified = self.ctx.qualified_name(call.func, scope) or ""
        if not qualified.startswith(torchapi.LR_SCHEDULER_PREFIX):
            return None
        name = qualified.rpartition(".")[2]
        return name if name[:1].isupper() and name != "LRScheduler" else None

    def _check_helper(
        self, call: ast.Call, schedule: str, item: Item, function: FunctionScope
    ) -> None:
        """A helper that builds its own scheduler on an optimizer it is handed, called
        on every pass of a loop that trains."""
        if any(f.node is not function.node and _is_loop(f.node) for f in item.frames):
            return
        for site in training_call_sites(self.ctx, function):
            passed = site.call
            argument = _optimizer_argument(function, passed, call)
            if argument is None or _rebuilt_in(argument, site.loop):
                continue
            self._report(
                call,
                schedule,
                f"every call of `{function.name}()`, which the loop at line {site.loop.line} "
                f"makes on every pass (line {passed.lineno})",
            )
            return

    def _report(self, call: ast.Call, schedule: str, where: str) -> None:
        text = self.ctx.segment(call)
        if len(text) > 60 or "\n" in text:
            text = f"{self.ctx.segment(call.func)}(...)"
        after = (
            "forgets its best value and patience, so it never lowers the rate"
            if schedule == "ReduceLROnPlateau"
            else "starts its schedule over and sets the learning rate back to where the "
            "schedule begins, so the rate never gets past the first step of its schedule"
        )
        self.report(
            call,
            f"`{text}` at line {call.lineno} builds a new `{schedule}` on {where}, on the "
            f"same optimizer: each new scheduler {after}",
            fix_hint="Build the scheduler once, before the training loop, and keep stepping "
            "that one (pass it to the helper); to resume a count, pass `last_epoch=`.",
            evidence={"scheduler": schedule},
        )


def _rebuilt_in(optimizer: ast.expr, loop: Loop) -> bool:
    """The optimizer expression is assigned again inside the loop (a new stage)."""
    text = ast.unparse(optimizer)
    for item in loop.items:
        node = item.node
        if isinstance(node, ast.Assign) and any(
            ast.unparse(t) == text
            or (isinstance(t, ast.Tuple) and any(ast.unparse(e) == text for e in t.elts))
            for t in node.targets
        ):
            return True
    return False


def _on_one_pass(item: Item, loop: Loop) -> bool:
    """The scheduler is built under ``if <counter> == <value>:`` of the loop's own counter
    (AlphaPose's ``if i == cfg.TRAIN.DPG_MILESTONE:``, a new stage that resets the rate
    and its schedule on purpose): once, not on every pass."""
    target = loop.node.target if isinstance(loop.node, (ast.For, ast.AsyncFor)) else None
    counters = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} if target else set()

    def equals_counter(branch: ast.If, in_body: bool) -> bool:
        test = branch.test
        return (
            in_body
            and isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and any(
                isinstance(side, ast.Name) and side.id in counters
                for side in (test.left, test.comparators[0])
            )
        )

    return guard_between(item.frames, loop.frame, equals_counter) is not None


def _stepped_in_inner_loop(names: set[str], items: list[Item], outer: ast.AST) -> bool:
    """The new scheduler is stepped inside a loop nested in the pass (once per batch):
    each pass then runs a whole schedule of its own, a restart that may be the design."""
    for item in items:
        node = item.node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "step"
            and ast.unparse(node.func.value) in names
        ):
            inside = [f.node for f in item.frames]
            start = inside.index(outer) + 1 if outer in inside else 0
            if any(_is_loop(n) for n in inside[start:]):
                return True
    return False


def _is_parameter(expr: ast.expr, function: FunctionScope) -> bool:
    if not isinstance(expr, ast.Name):
        return False
    return expr.id in function.parameter_names and not any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)
        for n in ast.walk(function.node)
    )


def _optimizer_argument(
    function: FunctionScope, passed: ast.Call, schedule: ast.Call
) -> ast.expr | None:
    """What the caller passes for the parameter the scheduler is built on."""
    optimizer = (
        schedule.args[0]
        if schedule.args
        else getattr(keyword(schedule, "optimizer"), "value", None)
    )
    if not isinstance(optimizer, ast.Name):
        return None
    found = function.argument_for(passed, optimizer.id)
    return found if isinstance(found, (ast.Name, ast.Attribute)) else None


def _is_loop(node: ast.AST) -> bool:
    return isinstance(node, (ast.For, ast.AsyncFor, ast.While))
