"""Activations that reach a loss through function parameters (TD301, TD303, TD305).

:mod:`.loss` pairs a loss call with what produced its input when the value is built in
the same function. Real code passes the pieces around: ``compute_loss(model(x), y)`` with
``def compute_loss(out, y): return criterion(out, y)``, ``train(model, loader)`` with the
loss written against the parameter ``model``, a criterion handed in as ``loss_fn``. This
rule follows such parameters back to the calls of the file that pass them
(:data:`~torchdoctor.static.analysis.events.MAX_CALL_DEPTH` callers up)
and asks :func:`~torchdoctor.static.analysis.loss_inputs.origin_of` about the argument there:
a model class (of this file or another linted one) whose ``forward`` ends in
``sigmoid``/``softmax`` (a function, a method, or an ``nn.Sigmoid()``/``nn.Softmax()`` last
layer) feeding ``BCEWithLogitsLoss``/``CrossEntropyLoss``, or raw scores feeding ``NLLLoss``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.callers import passed_values
from torchdoctor.static.analysis.events import MAX_CALL_DEPTH
from torchdoctor.static.analysis.loss_inputs import Activation, Origin, argument, origin_of
from torchdoctor.static.analysis.losses import loss_calls
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, ModuleScope
from torchdoctor.static.torchapi import LOSS_CLASSES, LOSS_SPELLINGS, LossKind
from torchdoctor.static.values import bound_value

_PROBLEMS: dict[tuple[LossKind, Activation], tuple[str, str, str]] = {
    (LossKind.CROSS_ENTROPY, Activation.SOFTMAX): (
        "TD301",
        "probabilities into a loss that applies log_softmax itself (a double "
        "softmax): the loss cannot fall below log(1 + (C-1)/e) and training stalls early",
        "Return the logits from the model; apply softmax only for predictions.",
    ),
    (LossKind.BCE_WITH_LOGITS, Activation.SIGMOID): (
        "TD303",
        "probabilities into a loss that applies sigmoid itself: every input is "
        "squashed into (0.5, 0.73) and gradients vanish",
        "Return the logits from the model (drop the final sigmoid); apply sigmoid only "
        "for predictions.",
    ),
    (LossKind.NLL, Activation.SOFTMAX): (
        "TD305",
        "probabilities, not log-probabilities, into `NLLLoss`",
        "Use `log_softmax` instead of softmax at the end of the model.",
    ),
    (LossKind.NLL, Activation.SIGMOID): (
        "TD305",
        "sigmoid outputs, not log-probabilities, into `NLLLoss`",
        "End the model with `log_softmax`, or use `CrossEntropyLoss` on the raw scores.",
    ),
    (LossKind.NLL, Activation.RAW): (
        "TD305",
        "raw scores, not log-probabilities, into `NLLLoss`: the loss has no lower "
        "bound and runs to minus infinity",
        "Apply `log_softmax(dim=1)` at the end of the model, or use `CrossEntropyLoss`.",
    ),
}


@detector("TD301", "TD303", "TD305", depth=Depth.LINT)
class ActivationThroughParameters(LintRule):
    """A model output or loss input that reaches a loss through a function parameter."""

    requires = LOSS_SPELLINGS
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        self._reported: set[tuple[int, str]] = set()
        for call in loss_calls(self.ctx):
            if call.input is not None and origin_of(self.ctx, call.input, call.scope) is None:
                self._judge(call.kind, call.call, call.input, call.scope)
        for function in module.functions:
            for item in function.items:
                if isinstance(item.node, ast.Call):
                    kind = self._passed_loss(item.node, function)
                    value = argument(item.node, 0, "input")
                    if kind is not None and value is not None:
                        self._judge(kind, item.node, value, function, direct=True)

    def _passed_loss(self, call: ast.Call, scope: FunctionScope) -> LossKind | None:
        """The loss a criterion parameter (``loss_fn(out, y)``) is, when every caller of
        the file passes the same kind."""
        if not isinstance(call.func, ast.Name) or not call.args:
            return None
        kinds = set()
        for value, caller, _ in passed_values(self.ctx, call.func, scope):
            kinds.add(LOSS_CLASSES.get(self.ctx.instance_type(value, caller) or ""))
        return kinds.pop() if len(kinds) == 1 else None

    def _judge(
        self, kind: LossKind, loss: ast.Call, value: ast.expr, scope: Scope, direct: bool = False
    ) -> None:
        origins = list(self._origins(value, scope, loss, 0))
        here = origin_of(self.ctx, value, scope) if direct else None
        if here is not None:
            origins.append((here, loss))
        for origin, site in origins:
            problem = _PROBLEMS.get((kind, origin.activation))
            if problem is None or (id(site), problem[0]) in self._reported:
                continue
            self._reported.add((id(site), problem[0]))
            self._report(kind, loss, site, origin, problem)

    def _origins(
        self, value: ast.expr, scope: Scope, site: ast.Call, depth: int
    ) -> Iterator[tuple[Origin, ast.Call]]:
        """Origins of ``value`` found through parameters, with where to report each."""
        ctx = self.ctx
        if depth >= MAX_CALL_DEPTH:  # as many callers up as analyses follow helpers down
            return
        for _ in range(3):  # out = model(x); loss(out, y): step back to the call
            if not isinstance(value, ast.Name):
                break
            source = bound_value(ctx, value, scope)
            if source is None or source[1] is not scope:
                break
            value = source[0]
        if isinstance(value, ast.Name):
            for passed, caller, call in passed_values(ctx, value, scope):
                origin = origin_of(ctx, passed, caller)
                if origin is not None:
                    yield origin, call
                else:
                    yield from self._origins(passed, caller, call, depth + 1)
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            for passed, caller, _call in passed_values(ctx, value.func, scope):
                stand_in = ast.copy_location(ast.Call(passed, value.args, value.keywords), value)
                origin = origin_of(ctx, stand_in, caller)
                if origin is not None:
                    yield origin, site

    def _report(
        self,
        kind: LossKind,
        loss: ast.Call,
        site: ast.Call,
        origin: Origin,
        problem: tuple[str, str, str],
    ) -> None:
        ctx = self.ctx
        code, why, hint = problem
        text = ctx.segment(site)
        text = text if len(text) <= 50 and "\n" not in text else ctx.segment(site.func)
        self.report(
            site,
            f"`{text}` at line {site.lineno} hands the loss `{ctx.segment(loss.func)}` "
            f"({kind.value}, line {loss.lineno}) the {origin.activation.value} output "
            f"{origin.where}: {why}",
            code=code,
            fix_hint=hint,
            evidence={
                "loss": kind.value,
                "activation": origin.activation.value,
                "loss_line": loss.lineno,
            },
        )
