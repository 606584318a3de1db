"""TD102 float64-in-training: float64 models or data in a program that trains.

In a file that trains (a ``backward()`` somewhere), every ``.double()``, ``.to(float64)``,
``dtype=torch.float64`` and ``set_default_dtype(torch.float64)`` is judged by where its
value goes (:func:`~torchdoctor.static.analysis.destinations.destination`), not by the name it
is given: a model, or a value that reaches a model call, a loss, a parameter or an
optimizer, is flagged; a statistic that only ends in ``.item()``, ``print``, a log or an
accumulator stays quiet. A value whose way the file does not show is flagged unless it is
a 0-d tensor (a counter or a running total, which never promotes a float32 tensor). Test
code, gradient checks and code under ``no_grad`` may use float64 freely.

A value's dtype is judged where it is used, not where it was made: float64 constants (a
diffusion noise schedule, a ``cumprod`` of them) cast to float32 before they reach a buffer
or a model (``.float()``, ``.to(torch.float32)``, ``torch.tensor(v, dtype=torch.float32)``,
a lambda that casts what it registers) are float32 where they are used; and a function
reached only from code under ``no_grad`` (a sampling step) is not training.

A warning needs proof: float64 followed into training (a model, a parameter, an optimizer,
``backward()``, the default dtype) in a file that shows no need for the precision
(:func:`~torchdoctor.static.analysis.precision.precision_need`: a tolerance below float32's
resolution, a sensitive solver, a gradient check). float64 chosen for precision, and
float64 the file does not show reaching training, are information.
"""

from __future__ import annotations

import ast
import os
from typing import cast

from torchdoctor.findings import Depth, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.destinations import Destination, Reach, destination
from torchdoctor.static.analysis.losses import loss_calls
from torchdoctor.static.analysis.paths import is_test_path
from torchdoctor.static.analysis.precision import (
    PrecisionNeed,
    precision_need,
    precision_option,
    stated_precision,
)
from torchdoctor.static.context import Scope
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, Item, ModuleScope
from torchdoctor.static.training import EventKind, classify

_FLOAT64 = torchapi.FLOAT64_DTYPES
_NARROWER = torchapi.NARROWER_THAN_FLOAT64
_GLOBAL = torchapi.SET_DEFAULT_DTYPE
_GRADCHECK = torchapi.GRADCHECK
_SCALAR_FACTORIES = torchapi.SCALAR_FACTORIES
_SHAPED_FACTORIES = torchapi.SHAPED_FACTORIES
# value.<cast>(): a new value of another dtype.
_CASTS = frozenset({"float", "half", "bfloat16", "int", "long", "bool", "short", "byte"})
_CONVERTERS = frozenset({"to", "type", "new_tensor"})
_CALLER_DEPTH = 3
# The sink of a finding about the model itself (``model.double()``).
_MODEL = ast.Name(id="<model>")


@detector("TD102", depth=Depth.LINT)
class Float64InTraining(LintRule):
    """``.double()``, ``dtype=torch.float64`` and friends whose value goes into training."""

    requires = ("float64", "double", "DoubleTensor")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        self._options: dict[int, ast.expr] = {}  # float64 calls made under a precision option
        # float64 in tests is numerics on purpose (gradcheck, reference values): quiet,
        # not just lowered to info. The path inside the project tells test code; folders
        # above the project say nothing about it.
        if is_test_path(ctx.project_path or os.path.basename(ctx.path)):
            return
        scopes = list(module.bodies())
        if not any(self._trains(scope, items) for scope, items in scopes):
            return
        hits: list[tuple[ast.Call, ast.AST, Reach, Scope]] = []
        for scope, items in scopes:
            if scope is not None and (
                scope.name.startswith("test")
                or any(ctx.is_call_to(i.node, *_GRADCHECK, scope=scope) for i in items)
                or self._only_without_grad(scope, _CALLER_DEPTH)
            ):
                continue
            hits += self._scan(scope, items)
        converted = any(hit[2][1] is _MODEL for hit in hits)
        # The program asks for float64 data itself (`dtype=torch.float64` outside the
        # model's classes): float64 numerics on purpose, so the model's conversion is
        # information. Without that, the conversion usually answers a dtype error from
        # NumPy's float64 data, the case worth a warning.
        deliberate = converted and any(
            hit is not call and (scope is None or scope.owner is None)
            for call, hit, _, scope in hits
        )
        # float64 that goes only into a loss as its input or target (pretrain-gnns'
        # criterion(pred.double(), y.double())): the network runs in float32, and a loss
        # over batch x outputs values in float64 is numerics on purpose, at little cost.
        losses = {id(found.call) for found in loss_calls(ctx)} if hits else set()
        need = precision_need(ctx, module) if hits else None
        for call, hit, reach, scope in hits:
            # Once the model itself is made float64, the float64 inputs it is then fed
            # (states, masks built in forward) follow from that one cause: one finding, at
            # the conversion.
            if (
                converted
                and (deliberate or self._feeds_a_module(reach, scope))
                and reach[1] is not _MODEL
            ):
                continue
            option = self._options.get(id(call))
            line = getattr(hit, "lineno", call.lineno)
            stated = stated_precision(ctx, line, scope.node if scope is not None else None)
            if option is not None:
                self._report_chosen(call, hit, option)
            elif need is not None or stated is not None:
                self._report_needed(call, hit, reach, cast("PrecisionNeed", need or stated))
            elif reach[0] is not Destination.TRAINING:
                self._report_unproved(call, hit, reach)
            elif id(reach[1]) in losses:
                self._report_loss_only(call, hit, cast("ast.Call", reach[1]))
            elif (
                not converted
                and self._feeds_a_module(reach, scope)
                and _passed_to(call, cast("ast.Call", reach[1]))
            ) or _matmul_operand(call, scope.node if scope is not None else ctx.tree):
                self._report_matched(call, hit)
            else:
                self._report(call, hit, reach, deliberate and reach[1] is _MODEL)

    def _trains(self, scope: Scope, items: list[Item]) -> bool:
        for item in items:
            node = item.node
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
            ):
                event = classify(self.ctx, item, scope)
                if event is not None and event.kind is EventKind.BACKWARD:
                    return True
        return False

    def _scan(
        self, scope: Scope, items: list[Item]
    ) -> list[tuple[ast.Call, ast.AST, Reach, Scope]]:
        found = []
        for item in items:
            node = item.node
            if not isinstance(node, ast.Call):
                continue
            hit = self._float64(node, scope)
            if hit is None or grad_disabled_by(self.ctx, item.frames) is not None:
                continue
            option = precision_option(item, hit)
            if option is not None:
                self._options[id(node)] = option
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Compare):
                continue  # (pred == y).double(): an accuracy, never an input
            reach = self._reach(node, scope)
            if reach is not None:
                found.append((node, hit, reach, scope))
        return found

    def _feeds_a_module(self, reach: Reach, scope: Scope) -> bool:
        sink = reach[1]
        return isinstance(sink, ast.Call) and self.ctx.is_in_family(
            sink.func, torchapi.MODULE, scope
        )

    def _reach(self, call: ast.Call, scope: Scope) -> Reach | None:
        """Where the float64 value goes when that makes it a finding; ``None`` if quiet."""
        ctx = self.ctx
        qualified = ctx.qualified_name(call.func, scope)
        if qualified in _GLOBAL:
            return Destination.TRAINING, None  # every tensor created from here on
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and qualified is None
            and ctx.is_in_family(func.value, torchapi.MODULE, scope)
        ):
            return Destination.TRAINING, _MODEL  # the model itself
        reach = destination(ctx, call, scope, self._casts)
        if reach[0] is Destination.SUMMARY or (
            reach[0] is not Destination.TRAINING and self._zero_dim(call, scope)
        ):
            return None
        return reach

    def _only_without_grad(self, scope: Scope, depth: int) -> bool:
        """``scope`` is a function called in this file only where autograd is off (itself
        under ``no_grad``, or from functions that are), so its float64 never trains."""
        if not isinstance(scope, FunctionScope) or depth <= 0:
            return False
        callers = self.ctx.callers(scope)
        return bool(callers) and all(
            grad_disabled_by(self.ctx, item.frames) is not None
            or (caller is not scope and self._only_without_grad(caller, depth - 1))
            for caller, item in callers
        )

    def _casts(self, call: ast.Call, node: ast.AST, scope: Scope) -> bool:
        """``call`` turns the value at ``node`` into one of another dtype: the float64 ends."""
        func = call.func
        ctx = self.ctx
        if isinstance(func, ast.Attribute) and func.value is node:
            if func.attr in _CASTS and not call.args:
                return ctx.qualified_name(func, scope) is None
            if func.attr in _CONVERTERS and ctx.qualified_name(func, scope) is None:
                return self._other_dtype(call, scope)
            return False
        if isinstance(func, ast.Name) and node in call.args:
            return self._lambda_casts(func, call.args.index(node), scope)
        qualified = ctx.qualified_name(func, scope)
        return (
            qualified is not None
            and qualified.startswith("torch.")
            and any(k.arg == "dtype" for k in call.keywords)
            and self._other_dtype(call, scope)
        )

    def _other_dtype(self, call: ast.Call, scope: Scope) -> bool:
        """``call`` names a dtype (positionally or as ``dtype=``) that is not float64."""
        named = [k.value for k in call.keywords if k.arg == "dtype"] + call.args[:1]
        return any(
            self.ctx.qualified_name(value, scope) in _NARROWER or self._saved_dtype(value, scope)
            for value in named
        )

    def _saved_dtype(self, value: ast.expr, scope: Scope) -> bool:
        """``value`` is a name bound to another value's ``.dtype`` (``dtype = x.dtype``
        before ``x.double()``): the cast returns the input's dtype, not float64."""
        if not isinstance(value, ast.Name):
            return False
        found = self.ctx.lookup(value, scope)
        binder = found[0].node if found is not None else None
        return (
            isinstance(binder, ast.Assign)
            and isinstance(binder.value, ast.Attribute)
            and binder.value.attr == "dtype"
        )

    def _lambda_casts(self, func: ast.Name, index: int, scope: Scope) -> bool:
        """``f(..., value)`` where ``f = lambda ..., v: ...`` uses ``v`` only through casts."""
        found = self.ctx.lookup(func, scope)
        binder = found[0].node if found is not None else None
        if not (isinstance(binder, ast.Assign) and isinstance(binder.value, ast.Lambda)):
            return False
        lam = binder.value
        params = lam.args.posonlyargs + lam.args.args
        if index >= len(params):
            return False
        name = params[index].arg
        parents = {id(c): p for p in ast.walk(lam.body) for c in ast.iter_child_nodes(p)}
        uses = [n for n in ast.walk(lam.body) if isinstance(n, ast.Name) and n.id == name]
        for use in uses:
            attribute = parents.get(id(use))
            call = parents.get(id(attribute))
            if not (
                isinstance(attribute, ast.Attribute)
                and isinstance(call, ast.Call)
                and self._casts(call, use, scope)
            ):
                return False
        return bool(uses)

    def _float64(self, call: ast.Call, scope: Scope) -> ast.AST | None:
        """The node that asks for float64 in ``call``, if any."""
        ctx = self.ctx
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "double"
            and not call.args
            and ctx.qualified_name(func, scope) is None
        ):
            return call
        for keyword in call.keywords:
            if keyword.arg == "dtype" and ctx.qualified_name(keyword.value, scope) in _FLOAT64:
                return keyword.value
        if not call.args:
            return None
        first = call.args[0]
        qualified = ctx.qualified_name(func, scope)
        to_method = (
            isinstance(func, ast.Attribute) and func.attr in ("to", "type") and qualified is None
        )
        if (to_method or qualified == "torch.set_default_dtype") and ctx.qualified_name(
            first, scope
        ) in _FLOAT64:
            return first
        if qualified == "torch.set_default_tensor_type" and (
            ctx.qualified_name(first, scope) == "torch.DoubleTensor"
            or isinstance(first, ast.Constant)
            and first.value == "torch.DoubleTensor"
        ):
            return first
        return None

    def _zero_dim(self, call: ast.Call, scope: Scope) -> bool:
        """A 0-d tensor: ``torch.tensor(0.0)``, ``torch.zeros(())`` (or one converted)."""
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and self.ctx.qualified_name(func, scope) is None
        ):
            return self._zero_dim(func.value, scope)
        qualified = self.ctx.qualified_name(func, scope)
        if not call.args:
            return qualified == "torch.scalar_tensor"
        first = call.args[0]
        if qualified in _SCALAR_FACTORIES:
            while isinstance(first, ast.UnaryOp):
                first = first.operand
            return isinstance(first, ast.Constant) and isinstance(first.value, (int, float))
        if qualified in _SHAPED_FACTORIES:
            return isinstance(first, (ast.Tuple, ast.List)) and not first.elts
        return False

    def _text(self, call: ast.Call, hit: ast.AST) -> str:
        text = self.ctx.segment(call)
        return text if len(text) <= 60 and "\n" not in text else self.ctx.segment(hit)

    def _report_needed(
        self, call: ast.Call, hit: ast.AST, reach: Reach, need: PrecisionNeed
    ) -> None:
        line = getattr(hit, "lineno", call.lineno)
        self.report(
            hit,
            f"`{self._text(call, hit)}` at line {line} asks for float64 on purpose: "
            f"{need.reason}; float64 costs twice the memory of float32 and is many times "
            "slower on most GPUs, the price of that precision",
            fix_hint="Keep float64 where the precision is needed; build the parts that do "
            "not need it (layers, data that never reach the solver) in float32.",
            evidence={"reaches": reach[0].name.lower(), "precision": need.kind},
            severity=Severity.INFO,
        )

    def _report_chosen(self, call: ast.Call, hit: ast.AST, option: ast.expr) -> None:
        line = getattr(hit, "lineno", call.lineno)
        self.report(
            hit,
            f"`{self._text(call, hit)}` at line {line} is float64 chosen by the option "
            f"`{self.ctx.segment(option)}` (line {option.lineno}): what the user asked for, "
            "at twice the memory of float32 and many times slower on most GPUs",
            fix_hint="Keep the option off unless the numerics need float64.",
            evidence={"option": self.ctx.segment(option)},
            severity=Severity.INFO,
        )

    def _report_unproved(self, call: ast.Call, hit: ast.AST, reach: Reach) -> None:
        line = getattr(hit, "lineno", call.lineno)
        where = (
            "the value is never used"
            if reach[0] is Destination.UNUSED
            else "this file does not show the value reaching a model, a loss, a parameter "
            "or an optimizer"
        )
        self.report(
            hit,
            f"`{self._text(call, hit)}` at line {line} is float64 in a program that trains "
            f"with backward(), but {where}: if it does reach training, it costs twice the "
            "memory of float32 and is many times slower on most GPUs",
            fix_hint="Use float32 (`.float()`, `dtype=torch.float32`) if this value feeds "
            "the model; keep float64 for statistics and numerical checks.",
            evidence={"reaches": reach[0].name.lower()},
            severity=Severity.INFO,
        )

    def _report_loss_only(self, call: ast.Call, hit: ast.AST, loss: ast.Call) -> None:
        ctx = self.ctx
        text = self._text(call, hit)
        reached = ctx.segment(loss.func)
        self.report(
            hit,
            f"`{text}` at line {getattr(hit, 'lineno', call.lineno)} is float64 only as an "
            f"input or target of the loss `{reached}(...)` at line {loss.lineno}: the network "
            "runs in float32, and a loss computed in float64 is a numerics choice that costs "
            "little",
            fix_hint="Keep it if the loss needs the precision; otherwise compute it in "
            "float32 (drop the `.double()`).",
            evidence={"reaches": "loss"},
            severity=Severity.INFO,
        )

    def _report_matched(self, call: ast.Call, hit: ast.AST) -> None:
        """Float64 handed straight to a module this file does not convert, or cast for a
        matrix product: a float32 module or operand would reject it, so it matches a
        model made float64 elsewhere; the choice is made there, not here."""
        text = self._text(call, hit)
        line = getattr(hit, "lineno", call.lineno)
        self.report(
            hit,
            f"`{text}` at line {line} casts to float64 to match what it is used with (a "
            "module's input or a matrix product, which reject mixed dtypes): the model it "
            "feeds is float64 already, made so elsewhere, where float64's cost is decided",
            fix_hint="If float64 is not needed, convert the model to float32 where it is "
            "made `.double()` and drop this cast with it.",
            evidence={"reaches": "matched"},
            severity=Severity.INFO,
        )

    def _report(self, call: ast.Call, hit: ast.AST, reach: Reach, deliberate: bool = False) -> None:
        ctx = self.ctx
        text = self._text(call, hit)
        line = getattr(hit, "lineno", call.lineno)
        sink = reach[1]
        where = ""
        if deliberate:
            self.report(
                hit,
                f"`{text}` at line {line} makes the model float64, and the program builds "
                "its data in float64 too: float64 numerics on purpose, at twice the memory "
                "of float32 and many times slower on most GPUs",
                fix_hint="Keep float64 only where the numerics need it; otherwise build the "
                "data in float32 and drop the model's `.double()`.",
                evidence={"reaches": "model"},
                severity=Severity.INFO,
            )
            return
        if reach[0] is Destination.TRAINING and isinstance(sink, ast.Call) and sink is not call:
            reached = ctx.segment(sink.func)
            if reached and len(reached) <= 40 and "\n" not in reached:
                where = f" (the value reaches `{reached}(...)` at line {sink.lineno})"
        self.report(
            hit,
            f"`{text}` at line {line} puts float64 into a program that trains with "
            f"backward(){where}: float64 takes twice the memory of float32 and runs many "
            "times slower on most GPUs, for no gain in accuracy",
            fix_hint="Use float32 (`.float()`, `dtype=torch.float32`); keep float64 only for "
            "numerical checks and statistics, and convert data from NumPy with "
            "`.float()`.",
            evidence={"reaches": reach[0].name.lower()},
        )


def _passed_to(value: ast.Call, sink: ast.Call) -> bool:
    """Whether ``value`` is (inside) an argument of ``sink``: handed to it directly."""
    arguments = [*sink.args, *(k.value for k in sink.keywords)]
    return any(value is node for argument in arguments for node in ast.walk(argument))


_MATMULS = frozenset({"mm", "matmul", "bmm"})


def _matmul_operand(value: ast.Call, root: ast.AST) -> bool:
    """Whether ``value`` is an operand of ``torch.mm``/``matmul``/``bmm`` or ``@``, which
    need both operands of one dtype: the cast matches the other operand."""
    for node in ast.walk(root):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            if value is node.left or value is node.right:
                return True
        elif isinstance(node, ast.Call) and any(value is a for a in node.args):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _MATMULS:
                return True
    return False
