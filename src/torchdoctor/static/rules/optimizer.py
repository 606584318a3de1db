"""Optimizer and AMP rules: TD607, TD608, TD609, TD610, TD611.

The order rules read the recorded items of a function (or of the module) in source order
and pair each clip or step with the latest ``backward()`` that can run before it on the
same path: a call in the ``else`` of the ``if`` that holds the backward (the usual
``if use_amp: ... else: ...`` split) is not on the same path (:func:`exclusive`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TypeGuard

from torchdoctor.findings import Applicability, Depth, Edit, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.rules.device import insert_keywords, loop_bound_names, torch_alias
from torchdoctor.static.rules.loss import constructor_of
from torchdoctor.static.structure import Frame, FrameKind, Item, Loop, ModuleScope
from torchdoctor.static.training import EventKind, classify, function_events, loop_events

__all__ = ["exclusive", "scaled_backward"]

_CLIPS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm",
                    "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grads_with_norm_",
                    "torch.nn.utils.clip_grad.clip_grad_norm_",
                    "torch.nn.utils.clip_grad.clip_grad_value_"})


def _conditions(ctx: FileContext, frames: tuple[Frame, ...]) -> set[tuple[str, bool]]:
    """The ``if`` tests around a place, each with the truth value it needs there."""
    found = set()
    for frame in frames:
        if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE) and isinstance(frame.node, ast.If):
            test = frame.node.test
            truth = frame.kind is FrameKind.IF_BODY
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, truth = test.operand, not truth
            text = ctx.segment(test)
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                    test.ops[0], (ast.IsNot, ast.NotEq)):
                positive = "is" if isinstance(test.ops[0], ast.IsNot) else "=="
                text = f"{ctx.segment(test.left)} {positive} {ctx.segment(test.comparators[0])}"
                truth = not truth
            found.add((text, truth))
    return found


def exclusive(ctx: FileContext, first: Item, second: Item) -> bool:
    """Whether two places can never run in the same pass (opposite sides of one test)."""
    mine = _conditions(ctx, first.frames)
    if not mine:
        return False
    theirs = _conditions(ctx, second.frames)
    return any((text, not truth) in theirs for text, truth in mine)


def _disabled(ctx: FileContext, scaler: ast.expr, scope: Scope) -> bool:
    """A scaler built with ``enabled=False``: scaling is a no-op."""
    built = constructor_of(ctx, scaler, scope)
    if built is None:
        return False
    flag = next((k.value for k in built.keywords if k.arg == "enabled"), None)
    return isinstance(flag, ast.Constant) and flag.value is False


def scaled_backward(ctx: FileContext, call: ast.AST, scope: Scope) -> ast.expr | None:
    """The scaler of ``scaler.scale(loss).backward()`` (also through a variable)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "backward"):
        return None
    receiver = call.func.value
    if isinstance(receiver, ast.Name):
        found = ctx.lookup(receiver, scope)
        if found is None or not isinstance(found[0].value, ast.Call):
            return None
        receiver = found[0].value
    if not (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
            and receiver.func.attr == "scale"):
        return None
    scaler = receiver.func.value
    if not ctx.is_in_family(scaler, torchapi.GRAD_SCALER, scope) or _disabled(ctx, scaler, scope):
        return None
    return scaler


def _scopes(module: ModuleScope) -> Iterator[tuple[Scope, list[Item]]]:
    yield None, module.items
    for function in module.functions:
        yield function, function.items


def _method(call: ast.AST, *names: str) -> TypeGuard[ast.Call]:
    """``<receiver>.<name>(...)`` for one of ``names``."""
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
        call.func.attr in names


def _receiver(call: ast.Call) -> ast.expr:
    """The receiver of a method call (``opt`` of ``opt.step()``)."""
    assert isinstance(call.func, ast.Attribute)
    return call.func.value


# --- TD608 and TD609 ---------------------------------------------------------------------


@detector("TD608", "TD609", depth=Depth.LINT)
class ScaledGradientsMisused(LintRule):
    """After ``scaler.scale(loss).backward()``: a clip before ``unscale_`` (TD608), or
    ``optimizer.step()`` instead of ``scaler.step(optimizer)`` (TD609)."""

    requires = ("scale(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for scope, items in _scopes(module):
            if any(_method(i.node, "scale") for i in items):
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
            if _method(node, "backward"):
                event = classify(ctx, item, scope)
                if event is not None and event.kind is EventKind.BACKWARD:
                    backwards.append((item, scaled_backward(ctx, node, scope)))
                continue
            if _method(node, "unscale_"):
                unscales.append(item)
                continue
            latest = next((b for b in reversed(backwards) if not exclusive(ctx, b[0], item)),
                          None)
            if latest is None or latest[1] is None:
                continue
            if ctx.is_call_to(node, *_CLIPS, scope=scope):
                if not any(latest[0].line <= u.line <= item.line and not exclusive(ctx, u, item)
                           for u in unscales):
                    self._clip(node, latest, items, _enclosing(statement, node))
            elif _method(node, "step") and not node.args and not node.keywords and \
                    ctx.is_in_family(_receiver(node), torchapi.OPTIMIZER, scope):
                self._step(node, latest, unscales)

    def _clip(self, clip: ast.Call, backward: tuple[Item, ast.expr | None], items: list[Item],
              statement: ast.stmt | ast.expr) -> None:
        ctx = self.ctx
        scaler = ctx.segment(backward[1]) if backward[1] is not None else "scaler"
        name = ctx.segment(clip.func)
        optimizer = _stepped_optimizer(ctx, items, backward[1])
        call = f"{scaler}.unscale_({optimizer or 'optimizer'})"
        fix = None
        if optimizer is not None and not ctx.line_text(statement.lineno)[
                :statement.col_offset].strip():
            fix = Fix(f"Unscale before clipping: `{call}`",
                      (_insert_above(ctx, statement, call),), Applicability.UNSAFE)
        self.report(
            clip, code="TD608",
            message=f"`{name}(...)` at line {clip.lineno} clips gradients that "
                    f"`{scaler}.scale(...).backward()` (line {backward[0].line}) multiplied by "
                    "the loss scale (65536 at the start): the threshold applies to scaled "
                    "gradients, so they are cut thousands of times more than intended and "
                    "training barely moves",
            fix_hint=f"Call `{call}` right before clipping.",
            evidence={"backward_line": backward[0].line},
            fix=fix,
        )

    def _step(self, step: ast.Call, backward: tuple[Item, ast.expr | None],
              unscales: list[Item]) -> None:
        ctx = self.ctx
        assert isinstance(step.func, ast.Attribute)
        optimizer = ctx.segment(step.func.value)
        scaler = ctx.segment(backward[1]) if backward[1] is not None else "scaler"
        unscaled = any(backward[0].line <= u.line <= step.lineno for u in unscales)
        why = ("the gradients were unscaled, but the step skips the scaler's inf/NaN check, so "
               "an overflowing step writes inf into the weights" if unscaled else
               "the gradients are still multiplied by the loss scale (65536 at the start), so "
               "the update is that many times too large (SGD diverges to NaN), and steps whose "
               "gradients overflowed are not skipped")
        self.report(
            step, code="TD609",
            message=f"`{optimizer}.step()` at line {step.lineno} runs after "
                    f"`{scaler}.scale(...).backward()` (line {backward[0].line}) without going "
                    f"through the scaler: {why}",
            fix_hint=f"Call `{scaler}.step({optimizer})` followed by `{scaler}.update()`.",
            evidence={"backward_line": backward[0].line},
            fix=Fix(f"Step through the scaler: `{scaler}.step({optimizer})`",
                    (ctx.replace(step, f"{scaler}.step({optimizer})"),), Applicability.UNSAFE),
        )


def _enclosing(statement: Item | None, call: ast.Call) -> ast.stmt | ast.expr:
    """The assignment a call sits in, else the call itself (a bare expression statement)."""
    if statement is not None and isinstance(statement.node, ast.stmt):
        node = statement.node
        end = (node.end_lineno or 0, node.end_col_offset or 0)
        if (node.lineno, node.col_offset) <= (call.lineno, call.col_offset) and \
                (call.end_lineno or 0, call.end_col_offset or 0) <= end:
            return node
    return call


def _insert_above(ctx: FileContext, node: ast.stmt | ast.expr, text: str) -> Edit:
    """Insert ``text`` as a new line above the line ``node`` starts, with its indent."""
    column = ctx.column(node.lineno, node.col_offset)
    indent = ctx.line_text(node.lineno)[:column]
    return Edit(node.lineno, column, node.lineno, column, f"{text}\n{indent}")


def _stepped_optimizer(ctx: FileContext, items: list[Item], scaler: ast.expr | None
                       ) -> str | None:
    """The optimizer of ``scaler.step(opt)`` in the same scope, for the fix."""
    if scaler is None:
        return None
    text = ctx.segment(scaler)
    for item in items:
        node = item.node
        if _method(node, "step") and node.args and ctx.segment(_receiver(node)) == text:
            return ctx.segment(node.args[0])
    return None


# --- TD607 -------------------------------------------------------------------------------


@detector("TD607", depth=Depth.LINT)
class SchedulerBeforeOptimizer(LintRule):
    """``scheduler.step()`` that runs before the first ``optimizer.step()`` of a loop."""

    requires = ("step",)

    def leave_loop(self, loop: Loop) -> None:
        if loop.parent is not None:
            return  # the outermost loop sees the nested ones: report each place once
        ctx = self.ctx
        events = loop_events(ctx, loop)
        schedules = [e for e in events if e.kind is EventKind.SCHEDULER_STEP]
        if not schedules:
            return
        steps = [(e.item, e.line) for e in events if e.kind is EventKind.OPTIMIZER_STEP]
        steps += self._helper_steps(loop)
        if not steps:
            return
        first, first_line = min(steps, key=lambda s: (s[1], getattr(s[0].node, "col_offset", 0)))
        for event in schedules:
            call = event.node
            if event.line > first_line or (isinstance(call, ast.Call) and call.args):
                continue  # after the first update, or ReduceLROnPlateau.step(metric)
            type_name = ctx.instance_type(event.target, loop.function) if event.target else None
            if type_name and type_name.endswith("ReduceLROnPlateau"):
                continue
            if self._skips_first_pass(event.item, loop):
                continue
            self._report(event.item, first, first_line, loop)

    def _helper_steps(self, loop: Loop) -> list[tuple[Item, int]]:
        """Calls in the loop to functions of this file that step an optimizer."""
        ctx = self.ctx
        found = []
        for item in loop.items:
            if not isinstance(item.node, ast.Call):
                continue
            helper = ctx.resolve_local_call(item.node, loop.function)
            if helper is not None and helper is not loop.function and any(
                    e.kind is EventKind.OPTIMIZER_STEP for e in function_events(ctx, helper)):
                found.append((item, item.line))
        return found

    def _skips_first_pass(self, item: Item, loop: Loop) -> bool:
        """Inside an ``if`` that tests a loop counter (``if epoch > 0:``)."""
        bound = loop_bound_names(loop)
        for frame in loop.inner_frames(item):
            if frame.kind in (FrameKind.IF_BODY, FrameKind.IF_ELSE) and isinstance(
                    frame.node, ast.If) and any(isinstance(n, ast.Name) and n.id in bound
                                                for n in ast.walk(frame.node.test)):
                return True
        return False

    def _report(self, schedule: Item, step: Item, step_line: int, loop: Loop) -> None:
        ctx = self.ctx
        scheduler = ctx.segment(schedule.node)
        stepped = ctx.segment(step.node)
        stepped = stepped if len(stepped) <= 40 and "\n" not in stepped else "optimizer.step()"
        self.report(
            schedule.node,
            f"`{scheduler}` at line {schedule.line} runs before `{stepped}` (line {step_line}) "
            f"in the loop at line {loop.line}: on the first pass the schedule advances before "
            "any update, so PyTorch skips its first learning-rate value and warns \"Detected "
            "call of `lr_scheduler.step()` before `optimizer.step()`\"",
            fix_hint="Call the scheduler after `optimizer.step()`: at the end of the epoch for "
                     "a per-epoch schedule, right after the optimizer for a per-step one.",
            evidence={"optimizer_step_line": step_line, "loop_line": loop.line},
        )


# --- TD610 -------------------------------------------------------------------------------

_PARAMETER_FREE = frozenset(f"torch.nn.{name}" for name in (
    "Identity", "ReLU", "ReLU6", "LeakyReLU", "GELU", "SiLU", "Mish", "ELU", "SELU", "CELU",
    "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softmax2d", "Softmin", "Softplus", "Softsign",
    "Hardtanh", "Hardswish", "Hardsigmoid", "Hardshrink", "Softshrink", "Tanhshrink",
    "Threshold", "GLU", "LogSigmoid", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "FeatureAlphaDropout", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d",
    "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "LPPool1d", "LPPool2d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d",
    "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
    "CircularPad2d", "CircularPad3d", "ChannelShuffle", "CosineSimilarity", "PairwiseDistance",
    "Fold", "Unfold"))
_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


@detector("TD610", depth=Depth.LINT)
class LayerReplacedAfterOptimizer(LintRule):
    """``model.fc = nn.Linear(...)`` after ``optimizer = SGD(model.parameters())``."""

    requires = ("parameters(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for scope, items in _scopes(module):
            self._check(scope, items)

    def _check(self, scope: Scope, items: list[Item]) -> None:
        ctx = self.ctx
        optimizers: list[tuple[Item, list[str]]] = []
        for item in items:
            node = item.node
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                roots = self._optimizer_roots(node.value, scope)
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
            if _method(node, "add_param_group"):
                regroups.append(item)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "setattr" and len(node.args) == 3 and isinstance(
                    node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                self._replacement(item, f"{ctx.segment(node.args[0])}.{node.args[1].value}",
                                  node.args[2], scope, replacements)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        rebinds.append((item, target.id))
                    elif isinstance(target, (ast.Attribute, ast.Subscript)):
                        self._replacement(item, _path(ctx, target), node.value, scope,
                                          replacements)
        for replacement in replacements:
            self._judge(replacement, optimizers, rebinds, regroups)

    def _optimizer_roots(self, value: ast.expr, scope: Scope) -> list[str]:
        """``["model"]`` for ``SGD(model.parameters())``; ``[]`` for anything else."""
        ctx = self.ctx
        if not isinstance(value, ast.Call) or not (value.args or value.keywords):
            return []
        qualified = ctx.qualified_name(value.func, scope)
        if qualified is None or not torchapi.in_family(qualified, torchapi.OPTIMIZER):
            return []
        params = value.args[0] if value.args else next(
            (k.value for k in value.keywords if k.arg == "params"), None)
        if isinstance(params, ast.Name):
            found = ctx.lookup(params, scope)
            params = found[0].value if found is not None else None
        if params is None:
            return []
        return [_path(ctx, _receiver(node)) for node in ast.walk(params)
                if _method(node, "parameters", "named_parameters")]

    def _replacement(self, item: Item, path: str, value: ast.expr, scope: Scope,
                     found: list[tuple[Item, str, str]]) -> None:
        what = self._new_parameters(value, scope)
        if what is not None:
            found.append((item, path, what))

    def _new_parameters(self, value: ast.expr, scope: Scope, depth: int = 0) -> str | None:
        """The class of a new module with parameters (or ``nn.Parameter``), else ``None``."""
        ctx = self.ctx
        type_name = ctx.instance_type(value, scope)
        if type_name is None or type_name in _PARAMETER_FREE or depth > 3:
            return None
        if type_name in _PARAMETER:
            return "nn.Parameter"
        if not ctx.is_family(type_name, torchapi.MODULE):
            return None
        if type_name == "torch.nn.Sequential" and isinstance(value, ast.Call) and value.args \
                and all(self._new_parameters(a, scope, depth + 1) is None for a in value.args):
            return None
        return type_name.rpartition(".")[2]

    def _judge(self, replacement: tuple[Item, str, str],
               optimizers: list[tuple[Item, list[str]]], rebinds: list[tuple[Item, str]],
               regroups: list[Item]) -> None:
        ctx = self.ctx
        item, path, what = replacement
        covering = [(o, root) for o, roots in optimizers for root in roots
                    if _covers(root, path) and not exclusive(ctx, o, item)]
        before = [(o, root) for o, root in covering if o.line < item.line]
        if not before:
            return
        optimizer, root = before[-1]
        name = root.partition(".")[0].partition("[")[0]
        if any(optimizer.line < r.line < item.line and n == name for r, n in rebinds):
            return  # the model itself was rebuilt in between
        if any(o.line > item.line for o, _ in covering) or any(
                r.line > item.line for r in regroups):
            return  # a new optimizer, or add_param_group, takes the new parameters
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


def _path(ctx: FileContext, expr: ast.expr) -> str:
    """``model.classifier`` for ``model.classifier[6]``; dotted text otherwise."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return "".join(ctx.segment(expr).split())


def _covers(root: str, path: str) -> bool:
    return path == root or path.startswith(root + ".") or root.startswith(path + ".")


# --- TD611 -------------------------------------------------------------------------------

_AMP_NAMES = frozenset({"autocast", "GradScaler", "custom_fwd", "custom_bwd"})
_DEPRECATED_AMP = frozenset(f"torch.cuda.amp.{name}" for name in _AMP_NAMES)
_DEVICE_FIRST = frozenset({"autocast", "GradScaler"})  # torch.amp.X("cuda", ...)


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
        replacement = f'torch.amp.{name}("cuda", ...)' if name in _DEVICE_FIRST \
            else f'torch.amp.{name}(..., device_type="cuda")'
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
        if not isinstance(expr, ast.Attribute) or not isinstance(root, ast.Name) or \
                root.id != torch:
            return None
        new = f"{torch}.amp.{name}"
        edits: tuple[Edit, ...]
        if name not in _DEVICE_FIRST:  # custom_fwd / custom_bwd take device_type=
            if call is None:
                edits = (ctx.replace(expr, f'{new}(device_type="cuda")'),)
            elif any(k.arg in ("device_type", None) for k in call.keywords):
                return None
            else:
                edits = (ctx.replace(expr, new),
                         insert_keywords(ctx, call, 'device_type="cuda"'))
        elif call is None or (name == "autocast" and call.args) or any(
                isinstance(a, ast.Starred) for a in call.args):
            return None  # old autocast(enabled, dtype) and new autocast(device, dtype, enabled)
        else:
            edits = (ctx.replace(call, _with_first_argument(ctx, call, new, '"cuda"')),)
        return Fix(f"Use `{new}`", edits, Applicability.SAFE)


def _with_first_argument(ctx: FileContext, call: ast.Call, func: str, first: str) -> str:
    """The call's text with a new callee and ``first`` as its first argument."""
    rest = ctx.segment(call)[len(ctx.segment(call.func)):].lstrip()[1:]
    separator = ", " if call.args or call.keywords else ""
    return f"{func}({first}{separator}{rest}"
