"""A loss scale started over on every step: TD627 grad-scaler-rebuilt-in-loop.

A ``GradScaler`` is its state: the current scale, halved after each step whose gradients
overflow and doubled after ``growth_interval`` clean steps. Built inside the loop that
trains, on the same pass that scales the loss and steps through it (``for batch in loader:
scaler = GradScaler(); scaler.scale(loss).backward(); scaler.step(optimizer)``), or in a
step helper that loop calls every pass, a new scaler starts from ``init_scale`` (65536)
each time and the halved scale is thrown away before it is used. When the gradients
overflow at that scale, every step is skipped, for the whole run, without an error.

Quiet when the new scaler is used in a loop nested in the pass (one scaler per epoch or per
stage, which adapts within it), when it is built with ``enabled=False``, and for scalers
built outside any loop that trains.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import keyword
from torchdoctor.static.analysis.loops import innermost_loop, local_frames, loop_of, trains
from torchdoctor.static.analysis.training_calls import training_call_sites
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, ModuleScope

# What a training step asks of its scaler.
_SCALER_USES = frozenset({"scale", "step", "update", "unscale_"})


@detector("TD627", depth=Depth.LINT)
class GradScalerRebuiltInLoop(LintRule):
    """``scaler = GradScaler()`` on every pass of the training loop that steps with it."""

    requires = ("GradScaler",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for scope, items in module.bodies():
            for item in items:
                assign = item.node
                if not (
                    isinstance(assign, ast.Assign)
                    and len(assign.targets) == 1
                    and isinstance(assign.value, ast.Call)
                    and self._builds_a_scaler(assign.value, scope)
                ):
                    continue
                name = ast.unparse(assign.targets[0])
                loop_node = innermost_loop(item)
                if loop_node is not None:
                    loop = next(
                        (
                            loop_of(ctx, f)
                            for f in local_frames(item.frames)
                            if f.node is loop_node and f.kind is FrameKind.LOOP
                        ),
                        None,
                    )
                    if loop is not None and trains(ctx, loop) and _used_in(name, items, loop_node):
                        self._report(
                            assign.value, f"every pass of the loop at line {loop.line}", name
                        )
                elif isinstance(scope, FunctionScope) and _used_in(name, items, None):
                    sites = training_call_sites(ctx, scope)
                    if sites:
                        site = sites[0]
                        self._report(
                            assign.value,
                            f"every call of `{scope.name}()`, which the loop at line "
                            f"{site.loop.line} makes on every pass (line {site.call.lineno})",
                            name,
                        )

    def _builds_a_scaler(self, call: ast.Call, scope: Scope) -> bool:
        qualified = self.ctx.qualified_name(call.func, scope) or ""
        if not torchapi.in_family(qualified, torchapi.GRAD_SCALER):
            return False
        enabled = keyword(call, "enabled")
        return not (
            enabled is not None
            and isinstance(enabled.value, ast.Constant)
            and enabled.value.value is False
        )

    def _report(self, call: ast.Call, where: str, name: str) -> None:
        text = self.ctx.segment(call)
        if len(text) > 60 or "\n" in text:
            text = f"{self.ctx.segment(call.func)}(...)"
        self.report(
            call,
            f"`{text}` at line {call.lineno} builds a new GradScaler on {where}, and "
            f"`{name}` serves that one step only: each new scaler starts again from its "
            "initial scale (65536), so the scale it halves after an overflow is thrown away "
            "before it is used; when the gradients overflow at that scale, every step is "
            "skipped for the whole run, without an error",
            fix_hint="Build the GradScaler once, before the training loop (beside the "
            "optimizer), and use that one for every step; save and restore "
            "`scaler.state_dict()` with the checkpoint.",
        )


def _used_in(name: str, items: list[Item], loop: ast.AST | None) -> bool:
    """``name.scale(...)``, ``name.step(...)``... in ``items`` with ``loop`` as their
    innermost loop (``None``: outside any loop of the function): the pass that builds the
    scaler steps with it, rather than a loop nested in the pass."""
    for item in items:
        node = item.node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _SCALER_USES
            and ast.unparse(node.func.value) == name
            and innermost_loop(item) is loop
        ):
            return True
    return False
