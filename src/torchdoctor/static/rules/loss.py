"""Loss rules: an activation the loss already applies, or lacks (TD301-TD305).

Every loss call of a file (``F.cross_entropy(...)``, ``criterion(...)`` for a criterion
bound to ``nn.CrossEntropyLoss()``) is paired with what produced its input: a softmax,
log_softmax or sigmoid, followed through local variables and through the ``forward`` of
a model class defined in the same file, or a linear layer's raw scores. The analysis runs
once the whole file has been seen, so a model class may be defined below its use.
:func:`loss_calls` is shared with the target-dtype rule (TD104).
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import cast

from torchdoctor.findings import Applicability, Depth, Edit, Fix
from torchdoctor.rules.detectors import detector
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import FileContext, Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import ModuleScope

__all__ = ["Activation", "LossCall", "LossKind", "Origin", "conditional", "constructor_of",
           "loss_calls", "origin_of"]


class LossKind(enum.Enum):
    """The losses these rules reason about, by their module name."""

    CROSS_ENTROPY = "CrossEntropyLoss"
    NLL = "NLLLoss"
    BCE = "BCELoss"
    BCE_WITH_LOGITS = "BCEWithLogitsLoss"


class Activation(enum.Enum):
    """What produced a loss input."""

    SOFTMAX = "softmax"
    LOG_SOFTMAX = "log_softmax"
    SIGMOID = "sigmoid"
    RAW = "raw scores"  # a linear or convolution layer's output


_FUNCTIONAL = {
    "torch.nn.functional.cross_entropy": LossKind.CROSS_ENTROPY,
    "torch.nn.functional.nll_loss": LossKind.NLL,
    "torch.nn.functional.binary_cross_entropy": LossKind.BCE,
    "torch.nn.functional.binary_cross_entropy_with_logits": LossKind.BCE_WITH_LOGITS,
}
_MODULES = {f"torch.nn.{kind.value}": kind for kind in LossKind}
_ACTIVATION_CALLS = {
    "torch.softmax": Activation.SOFTMAX, "torch.nn.functional.softmax": Activation.SOFTMAX,
    "torch.special.softmax": Activation.SOFTMAX,
    "torch.log_softmax": Activation.LOG_SOFTMAX,
    "torch.nn.functional.log_softmax": Activation.LOG_SOFTMAX,
    "torch.special.log_softmax": Activation.LOG_SOFTMAX,
    "torch.sigmoid": Activation.SIGMOID, "torch.nn.functional.sigmoid": Activation.SIGMOID,
    "torch.special.expit": Activation.SIGMOID,
    "torch.nn.functional.linear": Activation.RAW,
}
_ACTIVATION_METHODS = {"softmax": Activation.SOFTMAX, "log_softmax": Activation.LOG_SOFTMAX,
                       "sigmoid": Activation.SIGMOID}
_ACTIVATION_MODULES = {"torch.nn.Softmax": Activation.SOFTMAX,
                       "torch.nn.LogSoftmax": Activation.LOG_SOFTMAX,
                       "torch.nn.Sigmoid": Activation.SIGMOID}
_RAW_MODULES = frozenset({"torch.nn.Linear", "torch.nn.LazyLinear", "torch.nn.Bilinear",
                          "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d",
                          "torch.nn.LazyConv1d", "torch.nn.LazyConv2d", "torch.nn.LazyConv3d"})
# Tensor methods that keep what a value means (probabilities stay probabilities). Not
# `detach`: a loss of detached values trains nothing, it is a metric.
_KEEPS_MEANING = frozenset({"squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous",
                            "permute", "transpose", "float", "double", "half", "to", "type",
                            "view_as", "reshape_as", "clone", "squeeze_", "unsqueeze_", "cpu",
                            "cuda"})
_MAX_DEPTH = 6
_LOSS_WORDS = ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss",
               "binary_cross_entropy", "BCELoss", "BCEWithLogitsLoss")


@dataclass(frozen=True, slots=True)
class LossCall:
    """One call of a known loss.

    Attributes:
        kind: which loss.
        call: the call node.
        input: the prediction argument, ``None`` when it cannot be found.
        target: the target argument.
        constructor: the ``nn.XLoss(...)`` call a criterion was built from, when seen.
        scope: the function the call is in (``None``: module level).
    """

    kind: LossKind
    call: ast.Call
    input: ast.expr | None
    target: ast.expr | None
    constructor: ast.Call | None
    scope: Scope


@dataclass(frozen=True, slots=True)
class Origin:
    """What produced a value: the activation, where, and (for a direct call) its input."""

    activation: Activation
    node: ast.AST
    inner: ast.expr | None
    where: str


def loss_calls(ctx: FileContext) -> list[LossCall]:
    """Every loss call of the file, in source order. Computed once per file."""
    key = ("loss", "calls")
    cached = ctx.memo.get(key)
    if cached is None:
        found: list[LossCall] = []
        scopes: list[tuple[Scope, list[ast.AST]]] = [(None, [i.node for i in ctx.module.items])]
        scopes += [(f, [i.node for i in f.items]) for f in ctx.module.functions]
        for scope, nodes in scopes:
            for node in nodes:
                if isinstance(node, ast.Call):
                    call = _loss_call(ctx, node, scope)
                    if call is not None:
                        found.append(call)
        found.sort(key=lambda c: (c.call.lineno, c.call.col_offset))
        cached = ctx.memo[key] = found
    return cast("list[LossCall]", cached)


def _loss_call(ctx: FileContext, call: ast.Call, scope: Scope) -> LossCall | None:
    func = call.func
    qualified = ctx.qualified_name(func, scope)
    kind = _FUNCTIONAL.get(qualified or "")
    constructor = None
    if kind is None:
        if qualified is not None or not (call.args or call.keywords):
            return None
        if not isinstance(func, (ast.Name, ast.Attribute, ast.Call)):
            return None
        kind = _MODULES.get(ctx.instance_type(func, scope) or "")
        if kind is None:
            return None
        constructor = constructor_of(ctx, func, scope)
    return LossCall(kind, call, _argument(call, 0, "input"), _argument(call, 1, "target"),
                    constructor, scope)


def _argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    if len(call.args) > index and not any(isinstance(a, ast.Starred) for a in
                                          call.args[:index + 1]):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def constructor_of(ctx: FileContext, expr: ast.expr, scope: Scope) -> ast.Call | None:
    """The constructor call a value was built from (through names, ``self.x``, ``.to()``)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda", "cpu") and \
                    ctx.qualified_name(func, scope) is None:
                expr = func.value
                continue
            return expr
        source = _bound_value(ctx, expr, scope)
        if source is None:
            return None
        expr, scope = source
    return None


def _bound_value(ctx: FileContext, expr: ast.expr, scope: Scope) -> tuple[ast.expr, Scope] | None:
    """The expression a name or ``self.x`` was assigned (or unpacked from ``make()``).

    ``None`` when the assignment may not have run where the name is used: an assignment in
    an ``if``/loop/``try`` that does not also hold the use (``if not self.training: x =
    softmax(x)`` before ``return x``) leaves the value undecided.
    """
    if isinstance(expr, ast.Name):
        found = ctx.lookup(expr, scope)
        if found is not None and conditional(ctx, found[0].node, expr, found[1]):
            return None
        if found is not None and found[0].kind is BindingKind.UNPACKED:
            return ctx.unpacked_source(expr.id, found[0], found[1])
    elif isinstance(expr, ast.Attribute):
        found = ctx.attribute_binding(expr, scope)
    else:
        return None
    if found is None or found[0].kind is not BindingKind.ASSIGN or found[0].value is None:
        return None
    return found[0].value, found[1]


_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)


def conditional(ctx: FileContext, statement: ast.AST, use: ast.expr, scope: Scope) -> bool:
    """Whether ``statement`` sits in a branch or loop body that does not also hold ``use``."""
    root: ast.AST = scope.node if scope is not None else ctx.tree
    if not isinstance(statement, ast.stmt):
        return False
    stack: list[ast.AST] = [root]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt) or not _spans(child, statement):
                continue
            if child is statement:
                return False
            if isinstance(child, _BRANCHES) and not _spans(child, use):
                return True
            stack.append(child)
    return False


def _spans(outer: ast.stmt, inner: ast.AST) -> bool:
    start = (getattr(inner, "lineno", 0), getattr(inner, "col_offset", 0))
    return (outer.lineno, outer.col_offset) <= start <= (outer.end_lineno or 0,
                                                          outer.end_col_offset or 0)


def origin_of(ctx: FileContext, expr: ast.expr, scope: Scope, depth: int = 0) -> Origin | None:
    """What produced ``expr``'s value, when the file shows it; ``None`` when unknown."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, ast.Subscript):
        return origin_of(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Name):
        source = _bound_value(ctx, expr, scope)
        if source is None:
            return None
        origin = origin_of(ctx, source[0], source[1], depth + 1)
        if origin is None or origin.inner is None:
            return origin
        return Origin(origin.activation, origin.node, None, origin.where)
    if isinstance(expr, ast.Call):
        return _call_origin(ctx, expr, scope, depth)
    return None


def _call_origin(ctx: FileContext, call: ast.Call, scope: Scope, depth: int) -> Origin | None:
    func = call.func
    qualified = ctx.qualified_name(func, scope)
    where = f"from line {call.lineno}"
    if qualified is not None:
        activation = _ACTIVATION_CALLS.get(qualified)
        if activation is not None:
            return Origin(activation, call, _argument(call, 0, "input"), where)
        if qualified == "torch.log":
            return _log_of(ctx, _argument(call, 0, "input"), call, scope, depth)
        return None
    if isinstance(func, ast.Attribute):
        activation = _ACTIVATION_METHODS.get(func.attr)
        if activation is not None:
            return Origin(activation, call, func.value, where)
        if func.attr == "log" and not call.args:
            return _log_of(ctx, func.value, call, scope, depth)
        if func.attr in _KEEPS_MEANING:
            inner = origin_of(ctx, func.value, scope, depth + 1)
            return None if inner is None else Origin(inner.activation, inner.node, None,
                                                     inner.where)
    return _module_origin(ctx, call, scope, depth)


def _log_of(ctx: FileContext, inner: ast.expr | None, call: ast.Call, scope: Scope,
            depth: int) -> Origin | None:
    """``log(softmax(x))`` is a (less stable) log_softmax."""
    origin = None if inner is None else origin_of(ctx, inner, scope, depth + 1)
    if origin is not None and origin.activation is Activation.SOFTMAX:
        return Origin(Activation.LOG_SOFTMAX, call, None, f"from line {call.lineno}")
    return None


def _module_origin(ctx: FileContext, call: ast.Call, scope: Scope, depth: int
                   ) -> Origin | None:
    """The output of calling a module: an activation layer, a Sequential, a local model."""
    if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
        return None
    type_name = ctx.instance_type(call.func, scope)
    if type_name is None:
        return None
    inner = call.args[0] if call.args else None
    return _module_output(ctx, type_name, call.func, call, inner, scope, depth)


def _module_output(ctx: FileContext, type_name: str, module: ast.expr, call: ast.AST,
                   inner: ast.expr | None, scope: Scope, depth: int) -> Origin | None:
    where = f"from line {getattr(call, 'lineno', 0)}"
    if type_name in _ACTIVATION_MODULES:
        return Origin(_ACTIVATION_MODULES[type_name], call, inner, where)
    if type_name in _RAW_MODULES:
        return Origin(Activation.RAW, call, None, where)
    if type_name == "torch.nn.Sequential":
        built = constructor_of(ctx, module, scope)
        if built is None or not built.args or isinstance(built.args[-1], ast.Starred):
            return None
        last = built.args[-1]
        last_type = ctx.instance_type(last, scope)
        if last_type is None:
            return None
        origin = _module_output(ctx, last_type, last, last, None, scope, depth + 1)
        if origin is None:
            return None
        name = ctx.segment(last) if len(ctx.segment(last)) <= 40 else last_type
        return Origin(origin.activation, last, None,
                      f"of the last layer of the `nn.Sequential` at line {built.lineno} "
                      f"(`{name}`)")
    if type_name.startswith("<local>."):
        return _forward_origin(ctx, type_name[len("<local>."):], depth)
    return None


def _forward_origin(ctx: FileContext, class_name: str, depth: int) -> Origin | None:
    """What every ``return`` of a local model's ``forward`` gives, when they all agree."""
    cls = ctx.local_class(class_name)
    forward = None if cls is None else cls.methods.get("forward")
    if forward is None:
        return None
    returns = [r for r in _returns(forward.node.body) if r.value is not None]
    origins = [origin_of(ctx, r.value, forward, depth + 1) for r in returns if r.value]
    if not origins or any(o is None for o in origins):
        return None
    kinds = {o.activation for o in origins if o is not None}
    if len(kinds) != 1:
        return None
    return Origin(kinds.pop(), forward.node, None,
                  f"of the `forward` of `{class_name}` (line {returns[-1].lineno})")


def _returns(body: list[ast.stmt]) -> list[ast.Return]:
    """``return`` statements of a function body, nested functions and classes excluded."""
    found: list[ast.Return] = []
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Lambda)):
            stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
    return sorted(found, key=lambda r: r.lineno)


# (loss, activation) -> (code, what goes wrong, what to do)
_PROBLEMS: dict[tuple[LossKind, Activation], tuple[str, str, str]] = {
    (LossKind.CROSS_ENTROPY, Activation.SOFTMAX): (
        "TD301",
        "probabilities into a loss that applies log_softmax itself (a double softmax): "
        "the loss can never fall below log(1 + (C-1)/e), 1.46 for 10 classes, and its "
        "gradients shrink, so training stalls early",
        "Pass the logits (the tensor before softmax) to the loss; apply softmax only for "
        "predictions."),
    (LossKind.CROSS_ENTROPY, Activation.LOG_SOFTMAX): (
        "TD302",
        "log-probabilities into a loss that applies log_softmax again; the result is the "
        "same, but the extra pass is wasted work and hides intent",
        "Pass the logits to `CrossEntropyLoss`, or keep log_softmax and use `NLLLoss`."),
    (LossKind.BCE_WITH_LOGITS, Activation.SIGMOID): (
        "TD303",
        "probabilities into a loss that applies sigmoid itself: every input is squashed "
        "into (0.5, 0.73), so the loss cannot go below 0.31 and gradients vanish",
        "Pass the logits (the tensor before sigmoid) to the loss."),
    (LossKind.BCE, Activation.SIGMOID): (
        "TD304",
        "sigmoid followed by `BCELoss`: once a logit passes ~17 the sigmoid rounds to "
        "1.0, the loss is clamped at 100 and the gradient is exactly zero",
        "Return the logits and use `BCEWithLogitsLoss` (or "
        "`F.binary_cross_entropy_with_logits`); apply sigmoid only for predictions."),
    (LossKind.NLL, Activation.SOFTMAX): (
        "TD305",
        "probabilities, not log-probabilities, into `NLLLoss`: it minimises -p instead of "
        "-log p, so wrong classes are barely penalised",
        "Use `log_softmax` instead of softmax before `NLLLoss`, or pass the logits to "
        "`CrossEntropyLoss`."),
    (LossKind.NLL, Activation.SIGMOID): (
        "TD305",
        "sigmoid outputs, not log-probabilities, into `NLLLoss`",
        "Use `log_softmax` before `NLLLoss`, or pass the logits to `CrossEntropyLoss`."),
    (LossKind.NLL, Activation.RAW): (
        "TD305",
        "raw scores, not log-probabilities, into `NLLLoss`: it minimises -score, which "
        "has no lower bound, so the loss runs to minus infinity",
        "Apply `log_softmax(dim=1)` before `NLLLoss`, or use `CrossEntropyLoss` on the "
        "raw scores."),
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
        for call in calls:
            if call.input is None:
                continue
            origin = origin_of(self.ctx, call.input, call.scope)
            if origin is None:
                continue
            problem = _PROBLEMS.get((call.kind, origin.activation))
            if problem is None:
                continue
            single = call.constructor is None or sites.get(id(call.constructor)) == 1
            self._report(call, origin, problem, single)

    def _report(self, call: LossCall, origin: Origin, problem: tuple[str, str, str],
                single_site: bool) -> None:
        ctx = self.ctx
        code, why, hint = problem
        loss = ctx.segment(call.call.func)
        loss = loss if len(loss) <= 40 and "\n" not in loss else call.kind.value
        given = ctx.segment(call.input) if call.input is not None else "input"
        given = given if len(given) <= 40 and "\n" not in given else "the input"
        what = origin.activation.value
        source = (f"a {what} written into the call" if origin.node is call.input
                  else f"the {what} output {origin.where}")
        message = (f"`{loss}(...)` at line {call.call.lineno} ({call.kind.value}) receives "
                   f"`{given}`, {source}: {why}")
        self.report(call.call, message, code=code, fix_hint=hint,
                    evidence={"loss": call.kind.value, "activation": what,
                              "activation_line": getattr(origin.node, "lineno", None)},
                    fix=self._fix(call, origin, code, single_site))

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
        return Fix(f"Pass `{ctx.segment(origin.inner)}` (the logits) to the loss",
                   tuple(edits), Applicability.UNSAFE)

    def _to_logits_loss(self, call: LossCall) -> Edit | None:
        ctx = self.ctx
        target = call.call.func if call.constructor is None else call.constructor.func
        text = ctx.segment(target)
        if call.constructor is None and text.endswith("binary_cross_entropy"):
            return ctx.replace(target, text + "_with_logits")
        if call.constructor is not None and text.endswith("BCELoss"):
            return ctx.replace(target, text[: -len("BCELoss")] + "BCEWithLogitsLoss")
        return None
