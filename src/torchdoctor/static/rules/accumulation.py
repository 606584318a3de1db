"""TD618 accumulated-loss-not-scaled: gradient accumulation that sums, not averages.

``loss.backward()`` runs every iteration and ``optimizer.step()`` only under ``if (i + 1)
% k == 0:``; when the loss is never divided by ``k`` (nor by a name holding it), each step
applies ``k`` times the gradient of one batch. Looked for in loop bodies and in step
functions called once per batch, through helpers (:mod:`.step_sequences`).
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Depth, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.step_sequences import Action, Body, Kind, sequences
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, ModuleScope
from torchdoctor.static.values import bound_value

_MAX_DEPTH = 5


def _modulus(test: ast.expr) -> ast.expr | None:
    """``k`` of an ``if (i + 1) % k == 0:`` / ``if not step % k:`` test (``None``: not one)."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, test.comparators[0]]
        if any(isinstance(s, ast.Constant) and s.value == 0 for s in sides):
            test = next(s for s in sides if not (isinstance(s, ast.Constant) and s.value == 0))
    if isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod):
        k = test.right
        if isinstance(k, ast.Constant) and (not isinstance(k.value, int) or k.value <= 1):
            return None
        return k
    return None


def _guard(site: Item, outer: ast.AST | None) -> tuple[ast.If, ast.expr] | None:
    """The accumulation ``if`` around a site, inside its body (``outer`` excluded)."""
    for frame in reversed(site.frames):
        if frame.node is outer or frame.kind in (FrameKind.FUNCTION, FrameKind.LOOP):
            return None
        if frame.kind is FrameKind.IF_BODY and isinstance(frame.node, ast.If):
            k = _modulus(frame.node.test)
            if k is not None:
                return frame.node, k
    return None


def _under(action: Action, guard: ast.If) -> bool:
    """Whether an action runs only inside ``guard`` (in the body, or in its helper)."""
    return any(frame.node is guard for frame in (*action.site.frames, *action.own_item.frames))


@detector("TD618", depth=Depth.LINT)
class AccumulatedLossNotScaled(LintRule):
    """Accumulated gradients of ``k`` unscaled losses, stepped every ``k`` iterations."""

    requires = ("zero_grad",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        reported: set[int] = set()
        for body in sequences(self.ctx):
            found = self._unscaled(body)
            if found is not None and id(found[0].node) not in reported:
                reported.add(id(found[0].node))
                self._report(*found)

    def _unscaled(self, body: Body) -> tuple[Action, Action, ast.expr] | None:
        actions = body.actions
        outer = body.loop.node if body.loop is not None else None
        for step in (a for a in actions if a.kind is Kind.STEP):
            # the guard is in the body (`if (i + 1) % k == 0: opt.step()`) or in the
            # helper that steps (`def step_if_ready(self): if self.n % self.k == 0: ...`)
            found = _guard(step.own_item, outer)
            if found is None:
                continue
            guard, k = found
            zeros = [a for a in actions if a.kind is Kind.ZERO_GRAD]
            if not zeros or any(not _under(z, guard) for z in zeros):
                continue  # cleared every iteration: not accumulation
            backwards = [a for a in actions if a.kind is Kind.BACKWARD]
            if not backwards or any(_under(b, guard) for b in backwards):
                continue
            backward = backwards[0]
            if len(backwards) != 1 or backward.target is None:
                continue
            loss, where = _as_passed(self.ctx, backward, body.scope)
            if _scaled(self.ctx, loss, where, 0):
                continue
            return backward, step, k
        return None

    def _report(self, backward: Action, step: Action, k: ast.expr) -> None:
        ctx = self.ctx
        count = ctx.segment(k)
        loss = ctx.segment(backward.target) if backward.target is not None else "loss"
        fix = None
        if isinstance(backward.target, ast.Name) and not backward.through_helper:
            # inside a helper, `k` may not be visible: no edit there
            text = f"({loss} / {count})"
            fix = Fix(
                f"Divide the loss by `{count}` before backward()",
                (ctx.replace(backward.target, text),),
                Applicability.UNSAFE,
            )
        self.report(
            backward.node,
            f"`{ctx.segment(backward.node)}` at line {backward.line} accumulates gradients "
            f"over `{count}` iterations (`{ctx.segment(step.node)}` runs only every "
            f"`{count}`, line {step.line}), but `{loss}` is never divided by `{count}`: each "
            f"step applies `{count}` times the gradient of one batch, as if the learning "
            f"rate were `{count}` times larger",
            fix_hint=f"Divide the loss by the number of accumulation steps before "
            f"backward(): `({loss} / {count}).backward()`.",
            fix=fix,
            evidence={"step_line": step.line, "accumulation": count},
        )


def _as_passed(ctx: FileContext, backward: Action, body: Scope) -> tuple[ast.expr, Scope]:
    """The loss a backward runs on, seen from the body: ``self.backward(loss)`` whose helper
    calls ``loss.backward()`` on its parameter runs it on what the body passes."""
    target = backward.target
    site = backward.site.node
    assert target is not None
    if not (
        backward.through_helper
        and isinstance(target, ast.Name)
        and isinstance(site, ast.Call)
        and isinstance(backward.scope, FunctionScope)
        and ctx.resolve_local_call(site, body) is backward.scope
    ):
        return target, backward.scope
    passed = backward.scope.argument_for(site, target.id)
    return (passed, body) if passed is not None else (target, backward.scope)


def _scaled(ctx: FileContext, expr: ast.expr, scope: Scope, depth: int) -> bool:
    """Whether the value is (or may be) divided or multiplied by something, as far as the
    file shows; unknown sources count as scaled, so the rule stays quiet."""
    if depth > _MAX_DEPTH:
        return True
    if isinstance(expr, ast.BinOp):
        return (
            isinstance(expr.op, (ast.Div, ast.Mult, ast.FloorDiv))
            or _scaled(ctx, expr.left, scope, depth + 1)
            or _scaled(ctx, expr.right, scope, depth + 1)
        )
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in (
            "scale",
            "div",
            "mul",
            "div_",
            "mul_",
            "__truediv__",
        ):
            if func.attr != "scale":
                return True
            return not expr.args or _scaled(ctx, expr.args[0], scope, depth + 1)
        callee = ctx.resolve_local_call(expr, scope)
        if callee is not None:
            return any(
                isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult))
                for n in ast.walk(callee.node)
            )
        return False  # a loss function's result: not scaled
    if isinstance(expr, ast.Name):
        if _augmented(ctx, expr, scope):
            return True
        source = bound_value(ctx, expr, scope)
        if source is None:
            return True
        return _scaled(ctx, source[0], source[1], depth + 1)
    # outputs.loss of a model is the mean over one batch: not scaled
    return not (isinstance(expr, ast.Attribute) and expr.attr == "loss")


def _augmented(ctx: FileContext, name: ast.Name, scope: Scope) -> bool:
    """``loss /= k`` (or ``*=``) anywhere in the scope."""
    items = scope.items if scope is not None else ctx.module.items
    return any(
        isinstance(i.node, ast.AugAssign)
        and isinstance(i.node.target, ast.Name)
        and i.node.target.id == name.id
        and isinstance(i.node.op, (ast.Div, ast.Mult, ast.FloorDiv))
        for i in items
    )
