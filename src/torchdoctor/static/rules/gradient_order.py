"""The order of clipping, stepping and clearing across a training step split into helpers.

TD616 clip-after-step: ``clip_grad_norm_`` after ``optimizer.step()`` in the same
iteration, with no ``backward()`` between them. TD201 grads-never-cleared, for two-network
training: gradients cleared only on another optimizer than the one that steps (GANs:
``opt_d.zero_grad()`` ... ``opt_g.step()`` with ``opt_g`` never cleared). The single-optimizer
TD201 lives in :mod:`.loop_order`.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.step_sequences import Action, Body, Kind, sequences, text_of
from torchdoctor.static.branches import exclusive
from torchdoctor.static.context import FileContext
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, ModuleScope
from torchdoctor.static.training import EventKind, classify
from torchdoctor.static.values import constructor_of


def _closure_step(action: Action) -> bool:
    """``optimizer.step(closure)``: the closure runs backward itself (LBFGS)."""
    node = action.node
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.value is action.target
        and bool(node.args or node.keywords)
    )


@detector("TD616", depth=Depth.LINT)
class ClipAfterStep(LintRule):
    """Gradient clipping after the optimizer step of the same iteration."""

    requires = ("clip_grad",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        reported: set[int] = set()
        for body in sequences(self.ctx):
            actions = body.actions
            if not any(a.kind is Kind.CLIP for a in actions):
                continue
            for index, clip in enumerate(actions):
                if clip.kind is not Kind.CLIP or id(clip.node) in reported:
                    continue
                step = self._step_before(body, index)
                if step is not None:
                    reported.add(id(clip.node))
                    self._report(clip, step)

    def _step_before(self, body: Body, index: int) -> Action | None:
        """The step this clip follows with no backward (or earlier clip) in between."""
        actions = body.actions
        clip = actions[index]
        for position in range(index - 1, -1, -1):
            action = actions[position]
            if action.kind is Kind.BACKWARD:
                return None
            if action.kind is not Kind.STEP or _closure_step(action):
                continue
            if exclusive(self.ctx, action.site, clip.site):
                continue
            earlier = actions[:position]
            last_backward = max(
                (i for i, a in enumerate(earlier) if a.kind is Kind.BACKWARD), default=None
            )
            if last_backward is None and (
                body.loop is None or not any(a.kind is Kind.BACKWARD for a in actions[index:])
            ):
                return None
            start = 0 if last_backward is None else last_backward
            if any(a.kind is Kind.CLIP for a in earlier[start:]):
                return None  # clipped before the step too: the second clip is only wasted
            return action
        return None

    def _report(self, clip: Action, step: Action) -> None:
        ctx = self.ctx
        clip_text = ctx.segment(clip.node)
        if len(clip_text) > 60 or "\n" in clip_text:
            clip_text = f"{ctx.segment(clip.node.func)}(...)"  # type: ignore[attr-defined]
        step_text = ctx.segment(step.node)
        self.report(
            clip.node,
            f"`{clip_text}` at line {clip.line} runs after `{step_text}` (line {step.line}) "
            "with no backward() between them: the step has already applied the unclipped "
            "gradients, so clipping protects nothing (a gradient spike still reaches the "
            "weights)",
            fix_hint="Clip between `loss.backward()` and `optimizer.step()` (after "
            "`scaler.unscale_(optimizer)` with AMP).",
            evidence={"step_line": step.line},
        )


@detector("TD201", depth=Depth.LINT)
class OtherOptimizerCleared(LintRule):
    """Two optimizers step in one iteration but only one of them is ever cleared."""

    requires = ("zero_grad",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        reported: set[int] = set()
        for body in sequences(ctx):
            steps = [a for a in body.actions if a.kind is Kind.STEP and text_of(ctx, a.target)]
            if any(_closure_step(a) for a in steps):
                continue
            stepped = {text_of(ctx, a.target) for a in steps}
            if len(stepped) < 2 or not any(a.kind is Kind.BACKWARD for a in body.actions):
                continue
            cleared = self._cleared(body)
            if cleared is None or not cleared or not cleared <= stepped:
                continue
            for step in steps:
                name = text_of(ctx, step.target)
                if name in cleared or id(step.node) in reported:
                    continue
                if body.loop is None and self._cleared_by_callers(body.scope, name):
                    continue
                if not self._separate(
                    step, [a for a in steps if text_of(ctx, a.target) in cleared]
                ):
                    continue
                reported.add(id(step.node))
                self._report(step, name, sorted(cleared))

    def _cleared(self, body: Body) -> set[str] | None:
        """Optimizers whose gradients the body clears; ``None`` when something else (a
        module, a parameter, a nested loop over optimizers) clears gradients too."""
        ctx = self.ctx
        extra = []
        if body.loop is not None:
            direct = {id(i) for i in body.items}
            extra = [i for i in body.loop.items if id(i) not in direct]
        cleared: set[str] = set()
        zeros = [a for a in body.actions if a.kind is Kind.ZERO_GRAD]
        for item in extra:
            event = classify(ctx, item, body.scope)
            if event is not None and event.kind is EventKind.ZERO_GRAD:
                return None
        for action in zeros:
            name = text_of(ctx, action.target)
            if (
                not name
                or not isinstance(action.node, ast.Call)
                or not ctx.is_in_family(action.target, torchapi.OPTIMIZER, action.scope)  # type: ignore[arg-type]
            ):
                return None
            cleared.add(name)
        return cleared

    def _separate(self, step: Action, cleared: list[Action]) -> bool:
        """Whether the optimizer's parameters (``G.parameters()``) are, as far as the
        file shows, none of the cleared optimizers' (clearing one clears shared ones)."""
        mine = self._modules(step)
        if not mine or not cleared:
            return False
        return all(theirs and not mine & theirs for theirs in map(self._modules, cleared))

    def _modules(self, step: Action) -> set[str]:
        if step.target is None:
            return set()
        built = constructor_of(self.ctx, step.target, step.scope)
        if built is None or not built.args:
            return set()
        return {
            self.ctx.segment(node.func.value)
            for node in ast.walk(built.args[0])
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("parameters", "named_parameters")
        }

    def _cleared_by_callers(self, function: FunctionScope | None, name: str) -> bool:
        if function is None:
            return True
        callers = self.ctx.callers(function)
        if not callers:
            return False
        for body in sequences(self.ctx):
            calls_it = any(site.node is item.node for _, item in callers for site in body.items)
            if calls_it and any(
                a.kind is Kind.ZERO_GRAD and text_of(self.ctx, a.target) in (name, "")
                for a in body.actions
            ):
                return True
        return False

    def _report(self, step: Action, name: str, cleared: list[str]) -> None:
        ctx: FileContext = self.ctx
        others = ", ".join(f"`{c}.zero_grad()`" for c in cleared)
        self.report(
            step.node,
            f"`{ctx.segment(step.node)}` at line {step.line} steps `{name}`, but the "
            f"iteration only clears other optimizers ({others}): `{name}`'s gradients add "
            "up over every iteration, so each step applies the sum of all gradients so far",
            fix_hint=f"Call `{name}.zero_grad()` before the backward() whose gradients "
            f"`{name}` applies.",
            evidence={"cleared": cleared},
        )
