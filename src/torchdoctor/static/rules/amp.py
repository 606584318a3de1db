"""Mixed-precision rules: TD608 clip-before-unscale, TD609 step-bypasses-grad-scaler,
TD611 deprecated-cuda-amp.

TD608 and TD609 read the recorded items of a function (or of the module) in source order
and pair each clip or step with the latest ``backward()`` that can run before it on the
same path: a call in the ``else`` of the ``if`` that holds the backward (the usual ``if
use_amp: ... else: ...`` split) is not on the same path
(:func:`~torchdoctor.static.branches.exclusive`). TD611 finds the ``torch.cuda.amp``
entry points that ``torch.amp`` replaced.
"""

from __future__ import annotations

import ast
from typing import cast

from torchdoctor.findings import Applicability, Depth, Edit, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import insert_keywords, method_call, receiver, torch_alias
from torchdoctor.static.analysis.events import helper_to_follow
from torchdoctor.static.branches import exclusive
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, ModuleScope
from torchdoctor.static.training import EventKind, classify
from torchdoctor.static.values import constructor_of

__all__ = ["scaled_backward"]

_CLIPS = (*torchapi.CLIP_GRAD_NORM, *torchapi.CLIP_GRAD_VALUE, torchapi.CLIP_GRADS_WITH_NORM)


def _disabled(ctx: FileContext, scaler: ast.expr, scope: Scope) -> bool:
    """A scaler built with ``enabled=False``: scaling is a no-op."""
    built = constructor_of(ctx, scaler, scope)
    if built is None:
        return False
    flag = next((k.value for k in built.keywords if k.arg == "enabled"), None)
    return isinstance(flag, ast.Constant) and flag.value is False


def scaled_backward(ctx: FileContext, call: ast.AST, scope: Scope) -> ast.expr | None:
    """The scaler of ``scaler.scale(loss).backward()`` (also through a variable)."""
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "backward"
    ):
        return None
    scaled = call.func.value
    if isinstance(scaled, ast.Name):
        found = ctx.lookup(scaled, scope)
        if found is None or not isinstance(found[0].value, ast.Call):
            return None
        scaled = found[0].value
    if not (
        isinstance(scaled, ast.Call)
        and isinstance(scaled.func, ast.Attribute)
        and scaled.func.attr == "scale"
    ):
        return None
    scaler = scaled.func.value
    if not ctx.is_in_family(scaler, torchapi.GRAD_SCALER, scope) or _disabled(ctx, scaler, scope):
        return None
    return scaler


# --- TD608 and TD609 ---------------------------------------------------------------------


@detector("TD608", "TD609", depth=Depth.LINT)
class ScaledGradientsMisused(LintRule):
    """After ``scaler.scale(loss).backward()``: a clip before ``unscale_`` (TD608), or
    ``optimizer.step()`` instead of ``scaler.step(optimizer)`` (TD609)."""

    requires = ("scale(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for scope, items in module.bodies():
            if any(method_call(i.node, "scale") for i in items):
                self._check(scope, items)

    def _check(self, scope: Scope, items: list[Item]) -> None:
        ctx = self.ctx
        backwards: list[tuple[Item, ast.expr | None]] = []
        unscales: list[Item] = []
        statement: Item | None = None
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call):
                statement = item
                continue
            if method_call(node, "backward"):
                event = classify(ctx, item, scope)
                if event is not None and event.kind is EventKind.BACKWARD:
                    backwards.append((item, scaled_backward(ctx, node, scope)))
                continue
            if method_call(node, "unscale_"):
                unscales.append(item)
                continue
            latest = next((b for b in reversed(backwards) if not exclusive(ctx, b[0], item)), None)
            if latest is None or latest[1] is None:
                continue
            unscaled = any(
                latest[0].line <= u.line <= item.line and not exclusive(ctx, u, item)
                for u in unscales
            )
            if ctx.is_call_to(node, *_CLIPS, scope=scope):
                if not unscaled:
                    self._clip(node, latest, items, _enclosing(statement, node))
            elif (
                helper := helper_to_follow(ctx, node, scope, 0, {id(scope)}, instances=True)
            ) is not None:
                # the clip (or the unscale) moved into a helper: `self._clip_grads()`
                effect = _first_effect(ctx, helper, 1, {id(scope)})
                if effect is not None and effect[0] == "unscale":
                    unscales.append(item)
                elif effect is not None and not unscaled:
                    self._clip(effect[1], latest, items, effect[1], through=(node, helper))
            elif (
                method_call(node, "step")
                and not node.args
                and not node.keywords
                and ctx.is_in_family(receiver(node), torchapi.OPTIMIZER, scope)
                and not _where_no_scaler(ctx, item, latest[1])
            ):
                self._step(node, latest, unscales)

    def _clip(
        self,
        clip: ast.Call,
        backward: tuple[Item, ast.expr | None],
        items: list[Item],
        statement: ast.stmt | ast.expr,
        through: tuple[ast.Call, FunctionScope] | None = None,
    ) -> None:
        ctx = self.ctx
        scaler = ctx.segment(backward[1]) if backward[1] is not None else "scaler"
        name = ctx.segment(clip.func)
        optimizer = _stepped_optimizer(ctx, items, backward[1])
        call = f"{scaler}.unscale_({optimizer or 'optimizer'})"
        via = (
            ""
            if through is None
            else f" (in `{through[1].name}()`, called at line {through[0].lineno})"
        )
        fix = None
        if (
            through is None
            and optimizer is not None
            and not ctx.line_text(statement.lineno)[: statement.col_offset].strip()
        ):
            fix = Fix(
                f"Unscale before clipping: `{call}`",
                (_insert_above(ctx, statement, call),),
                Applicability.UNSAFE,
            )
        self.report(
            clip,
            code="TD608",
            message=f"`{name}(...)` at line {clip.lineno}{via} clips gradients that "
            f"`{scaler}.scale(...).backward()` (line {backward[0].line}) multiplied by "
            "the loss scale (65536 at the start): the threshold applies to scaled "
            "gradients, so they are cut thousands of times more than intended and "
            "training barely moves",
            fix_hint=f"Call `{call}` right before clipping.",
            evidence={"backward_line": backward[0].line},
            fix=fix,
        )

    def _step(
        self, step: ast.Call, backward: tuple[Item, ast.expr | None], unscales: list[Item]
    ) -> None:
        ctx = self.ctx
        assert isinstance(step.func, ast.Attribute)
        optimizer = ctx.segment(step.func.value)
        scaler = ctx.segment(backward[1]) if backward[1] is not None else "scaler"
        unscaled = any(backward[0].line <= u.line <= step.lineno for u in unscales)
        why = (
            "the gradients were unscaled, but the step skips the scaler's inf/NaN check, so "
            "an overflowing step writes inf into the weights"
            if unscaled
            else "the gradients are still multiplied by the loss scale (65536 at the start), so "
            "the update is that many times too large (SGD diverges to NaN), and steps whose "
            "gradients overflowed are not skipped"
        )
        self.report(
            step,
            code="TD609",
            message=f"`{optimizer}.step()` at line {step.lineno} runs after "
            f"`{scaler}.scale(...).backward()` (line {backward[0].line}) without going "
            f"through the scaler: {why}",
            fix_hint=f"Call `{scaler}.step({optimizer})` followed by `{scaler}.update()`.",
            evidence={"backward_line": backward[0].line},
            fix=Fix(
                f"Step through the scaler: `{scaler}.step({optimizer})`",
                (ctx.replace(step, f"{scaler}.step({optimizer})"),),
                Applicability.UNSAFE,
            ),
        )


def _where_no_scaler(ctx: FileContext, item: Item, scaler: ast.expr) -> bool:
    """The step sits in a branch taken only without the scaler: the body of
    ``if scaler is None:`` / ``if not scaler:``, or the ``else`` of
    ``if scaler is not None:`` / ``if scaler:`` (a scaled backward never reaches it)."""
    text = ctx.segment(scaler)
    for frame in item.frames:
        if frame.kind not in (FrameKind.IF_BODY, FrameKind.IF_ELSE):
            continue
        test = cast("ast.If", frame.node).test
        absent: bool | None = None  # whether the test holds when the scaler is absent
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
            and ctx.segment(test.left) == text
        ):
            absent = isinstance(test.ops[0], ast.Is)
        elif (
            isinstance(test, ast.UnaryOp)
            and isinstance(test.op, ast.Not)
            and ctx.segment(test.operand) == text
        ):
            absent = True
        elif ctx.segment(test) == text:
            absent = False
        if absent is not None and absent == (frame.kind is FrameKind.IF_BODY):
            return True
    return False


def _first_effect(
    ctx: FileContext, helper: FunctionScope, depth: int, path: set[int]
) -> tuple[str, ast.Call] | None:
    """What a helper of the file (``depth`` calls deep) does first to scaled gradients:
    ``("unscale", call)`` or ``("clip", call)``, following its own helpers as
    :func:`~torchdoctor.static.analysis.events.helper_to_follow` allows; ``None`` for
    neither."""
    path = path | {id(helper)}
    for item in helper.items:
        node = item.node
        if not isinstance(node, ast.Call):
            continue
        if method_call(node, "unscale_"):
            return ("unscale", node)
        if ctx.is_call_to(node, *_CLIPS, scope=helper):
            return ("clip", node)
        inner = helper_to_follow(ctx, node, helper, depth, path, instances=True)
        if inner is not None:
            effect = _first_effect(ctx, inner, depth + 1, path)
            if effect is not None:
                return effect
    return None


def _enclosing(statement: Item | None, call: ast.Call) -> ast.stmt | ast.expr:
    """The assignment a call sits in, else the call itself (a bare expression statement)."""
    if statement is not None and isinstance(statement.node, ast.stmt):
        node = statement.node
        end = (node.end_lineno or 0, node.end_col_offset or 0)
        if (node.lineno, node.col_offset) <= (call.lineno, call.col_offset) and (
            call.end_lineno or 0,
            call.end_col_offset or 0,
        ) <= end:
            return node
    return call


def _insert_above(ctx: FileContext, node: ast.stmt | ast.expr, text: str) -> Edit:
    """Insert ``text`` as a new line above the line ``node`` starts, with its indent."""
    column = ctx.column(node.lineno, node.col_offset)
    indent = ctx.line_text(node.lineno)[:column]
    return Edit(node.lineno, column, node.lineno, column, f"{text}\n{indent}")


def _stepped_optimizer(ctx: FileContext, items: list[Item], scaler: ast.expr | None) -> str | None:
    """The optimizer of ``scaler.step(opt)`` in the same scope, for the fix."""
    if scaler is None:
        return None
    text = ctx.segment(scaler)
    for item in items:
        node = item.node
        if method_call(node, "step") and node.args and ctx.segment(receiver(node)) == text:
            return ctx.segment(node.args[0])
    return None


# --- TD611 -------------------------------------------------------------------------------

_AMP_NAMES = torchapi.AMP_NAMES
_DEPRECATED_AMP = torchapi.DEPRECATED_AMP
_DEVICE_FIRST = torchapi.AMP_DEVICE_FIRST  # torch.amp.X("cuda", ...)


@detector("TD611", depth=Depth.LINT)
class DeprecatedCudaAmp(LintRule):
    """``torch.cuda.amp.autocast`` / ``GradScaler`` / ``custom_fwd`` / ``custom_bwd``."""

    requires = ("amp",)
    call_names = _AMP_NAMES

    def visit_call(self, node: ast.Call) -> None:
        self._check(node.func, node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A bare decorator (``@torch.cuda.amp.custom_bwd``) is a call too."""
        for decorator in node.decorator_list:
            if isinstance(decorator, (ast.Name, ast.Attribute)):
                self._check(decorator, None)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _deprecated(self, expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            if expr.id not in self.ctx.imports:
                return None  # a local alias: the assignment that made it is reported
        elif not isinstance(expr, ast.Attribute) or expr.attr not in _AMP_NAMES:
            return None
        qualified = self.ctx.qualified_name(expr)
        return qualified if qualified in _DEPRECATED_AMP else None

    def _check(self, expr: ast.expr, call: ast.Call | None) -> None:
        qualified = self._deprecated(expr)
        if qualified is None:
            return
        name = qualified.rpartition(".")[2]
        spelled = self.ctx.segment(expr)
        replacement = (
            f'torch.amp.{name}("cuda", ...)'
            if name in _DEVICE_FIRST
            else f'torch.amp.{name}(..., device_type="cuda")'
        )
        what = "is deprecated" if spelled == qualified else f"is the deprecated `{qualified}`"
        self.report(
            expr,
            f"`{spelled}` at line {expr.lineno} {what}: since PyTorch 2.4 it emits a "
            "FutureWarning on use, and it ties the code to CUDA",
            fix_hint=f"Use `{replacement}`.",
            fix=self._fix(expr, call, name),
        )

    def _fix(self, expr: ast.expr, call: ast.Call | None, name: str) -> Fix | None:
        """Exact rewrites only, for ``<torch>.cuda.amp.X`` spelled through ``torch``."""
        ctx = self.ctx
        root = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        torch = torch_alias(ctx, expr)
        if (
            not isinstance(expr, ast.Attribute)
            or not isinstance(root, ast.Name)
            or root.id != torch
        ):
            return None
        new = f"{torch}.amp.{name}"
        edits: tuple[Edit, ...]
        if name not in _DEVICE_FIRST:  # custom_fwd / custom_bwd take device_type=
            if call is None:
                edits = (ctx.replace(expr, f'{new}(device_type="cuda")'),)
            elif any(k.arg in ("device_type", None) for k in call.keywords):
                return None
            else:
                edits = (ctx.replace(expr, new), insert_keywords(ctx, call, 'device_type="cuda"'))
        elif (
            call is None
            or (name == "autocast" and call.args)
            or any(isinstance(a, ast.Starred) for a in call.args)
        ):
            return None  # old autocast(enabled, dtype) and new autocast(device, dtype, enabled)
        else:
            edits = (ctx.replace(call, _with_first_argument(ctx, call, new, '"cuda"')),)
        return Fix(f"Use `{new}`", edits, Applicability.SAFE)


def _with_first_argument(ctx: FileContext, call: ast.Call, func: str, first: str) -> str:
    """The call's text with a new callee and ``first`` as its first argument."""
    rest = ctx.segment(call)[len(ctx.segment(call.func)) :].lstrip()[1:]
    separator = ", " if call.args or call.keywords else ""
    return f"{func}({first}{separator}{rest}"
