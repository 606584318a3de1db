"""Loss rules: an activation the loss already applies, or lacks (TD301-TD305).

Every loss call of a file (``F.cross_entropy(...)``, ``criterion(...)`` for a criterion
bound to ``nn.CrossEntropyLoss()``) is paired with what produced its input
(:func:`~torchdoctor.static.analysis.loss_inputs.origin_of`): a softmax, log_softmax or
sigmoid, or a linear layer's raw scores. The analysis runs once the whole file has been
seen, so a model class may be defined below its use. The loss calls come from
:func:`~torchdoctor.static.analysis.losses.loss_calls`.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Depth, Edit, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static.analysis.loss_inputs import Activation, Origin, origin_of
from torchdoctor.static.analysis.losses import LossCall, loss_calls
from torchdoctor.static.context import Scope
from torchdoctor.static.grad_mode import grad_disabled_by
from torchdoctor.static.rules.base import LintRule, line_numbers
from torchdoctor.static.structure import FunctionScope, ModuleScope
from torchdoctor.static.torchapi import LossKind

_LOSS_WORDS = (
    "cross_entropy",
    "CrossEntropyLoss",
    "nll_loss",
    "NLLLoss",
    "binary_cross_entropy",
    "BCELoss",
    "BCEWithLogitsLoss",
)


# (loss, activation) -> (code, what goes wrong, what to do)
_PROBLEMS: dict[tuple[LossKind, Activation], tuple[str, str, str]] = {
    (LossKind.CROSS_ENTROPY, Activation.SOFTMAX): (
        "TD301",
        "probabilities into a loss that applies log_softmax itself (a double softmax): "
        "the loss can never fall below log(1 + (C-1)/e), 1.46 for 10 classes, and its "
        "gradients shrink, so training stalls early",
        "Pass the logits (the tensor before softmax) to the loss; apply softmax only for "
        "predictions.",
    ),
    (LossKind.CROSS_ENTROPY, Activation.LOG_SOFTMAX): (
        "TD302",
        "log-probabilities into a loss that applies log_softmax again; the result is the "
        "same, but the extra pass is wasted work and hides intent",
        "Pass the logits to `CrossEntropyLoss`, or keep log_softmax and use `NLLLoss`.",
    ),
    (LossKind.BCE_WITH_LOGITS, Activation.SIGMOID): (
        "TD303",
        "probabilities into a loss that applies sigmoid itself: every input is squashed "
        "into (0.5, 0.73), so the loss cannot go below 0.31 and gradients vanish",
        "Pass the logits (the tensor before sigmoid) to the loss.",
    ),
    (LossKind.BCE, Activation.SIGMOID): (
        "TD304",
        "sigmoid followed by `BCELoss`: once a logit passes ~17 the sigmoid rounds to "
        "1.0, the loss is clamped at 100 and the gradient is exactly zero",
        "Return the logits and use `BCEWithLogitsLoss` (or "
        "`F.binary_cross_entropy_with_logits`); apply sigmoid only for predictions.",
    ),
    (LossKind.NLL, Activation.SOFTMAX): (
        "TD305",
        "probabilities, not log-probabilities, into `NLLLoss`: it minimises -p instead of "
        "-log p, so wrong classes are barely penalised",
        "Use `log_softmax` instead of softmax before `NLLLoss`, or pass the logits to "
        "`CrossEntropyLoss`.",
    ),
    (LossKind.NLL, Activation.SIGMOID): (
        "TD305",
        "sigmoid outputs, not log-probabilities, into `NLLLoss`",
        "Use `log_softmax` before `NLLLoss`, or pass the logits to `CrossEntropyLoss`.",
    ),
    (LossKind.NLL, Activation.RAW): (
        "TD305",
        "raw scores, not log-probabilities, into `NLLLoss`: it minimises -score, which "
        "has no lower bound, so the loss runs to minus infinity",
        "Apply `log_softmax(dim=1)` before `NLLLoss`, or use `CrossEntropyLoss` on the raw scores.",
    ),
}


@detector("TD301", "TD302", "TD303", "TD304", "TD305", depth=Depth.LINT)
class ActivationIntoLoss(LintRule):
    """A loss input produced by an activation the loss applies itself, or lacks."""

    requires = _LOSS_WORDS
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        calls = loss_calls(self.ctx)
        sites: dict[int, int] = {}
        for call in calls:
            if call.constructor is not None:
                sites[id(call.constructor)] = sites.get(id(call.constructor), 0) + 1
        # One finding per cause: a model whose forward ends in the activation, fed to one
        # loss at several lines (a GAN's real and fake terms), is one fix, reported at its
        # first call with the others named. An activation written into a call is its own.
        shared: dict[tuple[object, ...], list[tuple[LossCall, Origin, tuple[str, str, str]]]]
        shared = {}
        for call in calls:
            if call.input is None:
                continue
            origin = origin_of(self.ctx, call.input, call.scope)
            if origin is None:
                continue
            problem = _PROBLEMS.get((call.kind, origin.activation))
            if problem is None:
                continue
            if origin.node is not call.input:
                loss = (
                    id(call.constructor) if call.constructor else self.ctx.segment(call.call.func)
                )
                quiet = self._without_gradients(call, problem[0])
                key = (problem[0], loss, id(origin.node), origin.where, quiet)
                shared.setdefault(key, []).append((call, origin, problem))
                continue
            single = call.constructor is None or sites.get(id(call.constructor)) == 1
            self._report(call, origin, problem, single)
        for group in shared.values():
            call, origin, problem = group[0]
            others = sorted({c.call.lineno for c, _, _ in group[1:]} - {call.call.lineno})
            self._report(call, origin, problem, single_site=False, others=others)

    def _without_gradients(self, call: LossCall, code: str) -> bool:
        """TD304's harm is to gradients: a loss computed with autograd off (an evaluation
        under ``no_grad``) only reports a value, clamped at 100 for certain mistakes."""
        return code == "TD304" and grad_disabled_by(self.ctx, call.frames) is not None

    def _report(
        self,
        call: LossCall,
        origin: Origin,
        problem: tuple[str, str, str],
        single_site: bool,
        others: list[int] | None = None,
    ) -> None:
        ctx = self.ctx
        code, why, hint = problem
        loss = ctx.segment(call.call.func)
        loss = loss if len(loss) <= 40 and "\n" not in loss else call.kind.value
        given = ctx.segment(call.input) if call.input is not None else "input"
        given = given if len(given) <= 40 and "\n" not in given else "the input"
        what = origin.activation.value
        source = (
            f"a {what} written into the call"
            if origin.node is call.input
            else f"the {what} output {origin.where}"
        )
        also = f", as it does at {line_numbers(others)}" if others else ""
        message = (
            f"`{loss}(...)` at line {call.call.lineno} ({call.kind.value}) receives "
            f"`{given}`, {source}{also}: {why}"
        )
        quiet = self._without_gradients(call, code)
        if quiet:
            message += "; here autograd is off, so only the reported loss value is affected"
        documented = code == "TD304" and not quiet and _documented_as_unstable(call.scope)
        if documented:
            message += (
                "; the code around it documents that instability, so it is written this way "
                "on purpose (a reference form kept beside the stable one)"
            )
            quiet = True
        self.report(
            call.call,
            message,
            code=code,
            severity=Severity.INFO if quiet else None,
            fix_hint=hint,
            evidence={
                "loss": call.kind.value,
                "activation": what,
                "activation_line": getattr(origin.node, "lineno", None),
                "other_lines": others or [],
            },
            fix=self._fix(call, origin, code, single_site),
        )

    def _fix(self, call: LossCall, origin: Origin, code: str, single_site: bool) -> Fix | None:
        """Unwrap an activation written inside the loss call (and switch BCE to logits)."""
        if code not in ("TD301", "TD303", "TD304") or origin.inner is None:
            return None
        if origin.node is not call.input or not single_site:
            return None
        ctx = self.ctx
        edits = [ctx.replace(origin.node, ctx.segment(origin.inner))]
        if code == "TD304":
            switched = self._to_logits_loss(call)
            if switched is None:
                return None
            edits.append(switched)
        return Fix(
            f"Pass `{ctx.segment(origin.inner)}` (the logits) to the loss",
            tuple(edits),
            Applicability.UNSAFE,
        )

    def _to_logits_loss(self, call: LossCall) -> Edit | None:
        ctx = self.ctx
        target = call.call.func if call.constructor is None else call.constructor.func
        text = ctx.segment(target)
        if call.constructor is None and text.endswith("binary_cross_entropy"):
            return ctx.replace(target, text + "_with_logits")
        if call.constructor is not None and text.endswith("BCELoss"):
            return ctx.replace(target, text[: -len("BCELoss")] + "BCEWithLogitsLoss")
        return None


def _documented_as_unstable(scope: Scope) -> bool:
    """The docstring of the function holding the loss, or of its class, calls the form
    numerically unstable (PyKEEN's ``BCEAfterSigmoidLoss``: "the numerically unstable
    version of explicit Sigmoid + BCE loss"): the author knows the harm and keeps it."""
    nodes: list[ast.AST] = []
    if isinstance(scope, FunctionScope):
        nodes.append(scope.node)
        if scope.owner is not None:
            nodes.append(scope.owner.node)
    for node in nodes:
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        text = (ast.get_docstring(node) or "").lower()
        if "unstable" in text or "instability" in text:
            return True
    return False
