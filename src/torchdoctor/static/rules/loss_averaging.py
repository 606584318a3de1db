"""Averaging a loss over a pass: TD311 loss-average-mismatch.

A loss with the default ``reduction="mean"`` is already an average over its batch. Summed
over the batches of a pass and divided by the number of *examples*
(``len(loader.dataset)``, or a counter of ``labels.size(0)``), the "average" comes out
smaller by the batch size; a ``reduction="sum"`` loss divided by the number of *batches*
(``len(loader)``) comes out larger by it. Both are the common copy of a pattern that was
right with the other reduction (pytorch/examples sums with ``reduction="sum"`` and
divides by the dataset size). The reported loss, and everything compared with it, is off
by a factor nobody sees.

The rule reads one function: ``total += <loss>`` (through ``.item()``, ``float()``,
``.detach()``, or a name bound to the loss in the same loop) inside a loop, and a later
``total / <divisor>`` or ``total /= <divisor>``. Losses whose reduction the file does not
show, accumulations multiplied by a batch size (in the sum, or in place before it:
``loss *= len(y)``), and loops over loaders of one example per batch stay quiet.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import cast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.dataloader import (
    iterated,
    loader_of,
    one_per_batch,
    one_per_batch_wherever_passed,
)
from torchdoctor.static.analysis.loops import innermost_loop
from torchdoctor.static.bindings import BindingKind
from torchdoctor.static.context import Scope
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FunctionScope, Item, ModuleScope
from torchdoctor.static.values import constructor_of

_LOSS_NAMES = (
    "L1Loss",
    "MSELoss",
    "CrossEntropyLoss",
    "NLLLoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "SmoothL1Loss",
    "HuberLoss",
    "KLDivLoss",
    "SoftMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "CosineEmbeddingLoss",
    "MarginRankingLoss",
    "HingeEmbeddingLoss",
    "TripletMarginLoss",
    "PoissonNLLLoss",
    "GaussianNLLLoss",
)
_LOSS_CLASSES = frozenset(f"torch.nn.{name}" for name in _LOSS_NAMES)
_LOSS_FUNCTIONS = frozenset(
    f"torch.nn.functional.{name}"
    for name in (
        "l1_loss",
        "mse_loss",
        "cross_entropy",
        "nll_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "smooth_l1_loss",
        "huber_loss",
        "kl_div",
        "soft_margin_loss",
        "multilabel_soft_margin_loss",
        "cosine_embedding_loss",
        "margin_ranking_loss",
        "hinge_embedding_loss",
        "triplet_margin_loss",
        "poisson_nll_loss",
        "gaussian_nll_loss",
    )
)
# Calls and attributes that hand the same number on: `loss.item()`, `float(loss)`.
_PASS_THROUGH_METHODS = frozenset({"item", "detach", "cpu", "tolist"})


class Reduction(enum.Enum):
    MEAN = "mean"
    SUM = "sum"


class Divisor(enum.Enum):
    EXAMPLES = "the number of examples"
    BATCHES = "the number of batches"


@dataclass(frozen=True, slots=True)
class Accumulation:
    item: Item
    loss: ast.Call
    reduction: Reduction
    loop: ast.AST


@detector("TD311", depth=Depth.LINT)
class LossAverageMismatch(LintRule):
    """``total += criterion(out, y).item()`` then ``total / len(loader.dataset)``."""

    requires = ("+=", "len(")
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        for scope, items in module.bodies():
            accumulations: dict[str, Accumulation] = {}
            counters: dict[str, tuple[ast.AST, Divisor]] = {}
            for item in items:
                node = item.node
                if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
                    self._record(item, node, scope, accumulations, counters)
            if not accumulations:
                continue
            seen: set[int] = set()  # a division inside a call is in two items
            for item in items:
                for total, divisor in _divisions(item.node):
                    found = accumulations.get(total)
                    if (
                        found is not None
                        and item.line > found.item.line
                        and id(divisor) not in seen
                    ):
                        seen.add(id(divisor))
                        self._judge(found, item, divisor, counters, scope)

    def _record(
        self,
        item: Item,
        node: ast.AugAssign,
        scope: Scope,
        accumulations: dict[str, Accumulation],
        counters: dict[str, tuple[ast.AST, Divisor]],
    ) -> None:
        loop = innermost_loop(item)
        target = ast.unparse(node.target)
        if loop is None:
            return
        counted = _counts(node.value)
        if counted is not None:
            counters[target] = (loop, counted)
            return
        loss = self._loss_value(node.value, item, loop, scope)
        if loss is None:
            return
        reduction = self._reduction(loss, scope)
        if reduction is not None:
            accumulations[target] = Accumulation(item, loss, reduction, loop)

    def _loss_value(
        self, value: ast.expr, item: Item, loop: ast.AST, scope: Scope
    ) -> ast.Call | None:
        """The loss call an accumulated value is, unchanged in size (else ``None``)."""
        value = _unwrapped(value)
        if isinstance(value, ast.Name):
            # The name's binding (the one lookup finds, not a scan of the items, which
            # would make long generated functions quadratic), when made in the loop.
            found = self.ctx.lookup(value, scope)
            bound = found[0].value if found is not None else None
            first, last = getattr(loop, "lineno", 0), getattr(loop, "end_lineno", 0) or 0
            if (
                found is not None
                and found[0].kind is BindingKind.ASSIGN
                and bound is not None
                and first <= bound.lineno <= last
                and bound.lineno < item.line
            ):
                key = ("in-place-scalings", id(loop))
                if key not in self.ctx.memo:
                    self.ctx.memo[key] = _scalings(loop)
                scalings = cast("list[tuple[tuple[int, int], str, ast.expr]]", self.ctx.memo[key])
                if _scaled_between(scalings, value.id, found[0].node, item.node):
                    return None  # `loss *= len(y)`: a batch sum now, not a batch mean
                value = _unwrapped(bound)
        return value if isinstance(value, ast.Call) else None

    def _reduction(self, call: ast.Call, scope: Scope) -> Reduction | None:
        """How a loss call reduces its batch, when the file shows it."""
        ctx = self.ctx
        qualified = ctx.qualified_name(call.func, scope)
        if qualified in _LOSS_FUNCTIONS:
            return _reduction_of(call)
        if qualified is not None or ctx.instance_type(call.func, scope) not in _LOSS_CLASSES:
            return None
        constructor = constructor_of(ctx, call.func, scope)
        return None if constructor is None else _reduction_of(constructor)

    def _judge(
        self,
        found: Accumulation,
        division: Item,
        divisor: ast.expr,
        counters: dict[str, tuple[ast.AST, Divisor]],
        scope: Scope,
    ) -> None:
        kind = self._divisor_kind(divisor, counters, found.loop, scope)
        if kind is None:
            return
        if (found.reduction, kind) not in (
            (Reduction.MEAN, Divisor.EXAMPLES),
            (Reduction.SUM, Divisor.BATCHES),
        ):
            return
        if self._one_example_per_batch(found.loop, scope):
            return
        ctx = self.ctx
        total = ctx.segment(found.item.node.target)  # type: ignore[attr-defined]
        loss = ctx.segment(found.loss)
        if len(loss) > 50 or "\n" in loss:
            loss = ctx.segment(found.loss.func) + "(...)"
        if found.reduction is Reduction.MEAN:
            what, off = "the mean over its batch", "too small by the batch size"
            fix = (
                "Accumulate `loss.item() * batch_size` (or build the loss with "
                '`reduction="sum"`), or divide by the number of batches instead.'
            )
        else:
            what, off = "the sum over its batch", "too large by the batch size"
            fix = "Divide by the number of examples, or use the default mean reduction."
        self.report(
            division.node,
            f"`{total}` adds up `{loss}` (line {found.item.line}), {what}, and is divided at "
            f"line {division.line} by `{ctx.segment(divisor)}`, {kind.value}: the average "
            f"comes out {off}",
            fix_hint=fix,
            evidence={"reduction": found.reduction.value, "divisor": kind.name.lower()},
        )

    def _divisor_kind(
        self,
        divisor: ast.expr,
        counters: dict[str, tuple[ast.AST, Divisor]],
        loop: ast.AST,
        scope: Scope,
    ) -> Divisor | None:
        ctx = self.ctx
        counter = counters.get(ast.unparse(divisor))
        if counter is not None:
            return counter[1] if counter[0] is loop else None
        if not (
            isinstance(divisor, ast.Call)
            and isinstance(divisor.func, ast.Name)
            and divisor.func.id == "len"
            and len(divisor.args) == 1
        ):
            return None
        measured = divisor.args[0]
        if isinstance(measured, ast.Attribute) and measured.attr in ("dataset", "sampler"):
            return Divisor.EXAMPLES
        if ctx.is_in_family(measured, torchapi.DATALOADER, scope):
            return Divisor.BATCHES
        if ctx.is_in_family(measured, "torch.utils.data.Dataset", scope):
            return Divisor.EXAMPLES
        name = ctx.segment(measured).rpartition(".")[2].lower()
        if name.endswith(("dataset", "_set", "set")) and not name.endswith("subset_loader"):
            return Divisor.EXAMPLES
        if name.endswith(("loader", "_dl")):
            return Divisor.BATCHES
        return None

    def _one_example_per_batch(self, loop: ast.AST, scope: Scope) -> bool:
        """The loop reads a ``DataLoader`` built with ``batch_size`` 1 (its default): in
        the file, or, for a loader the function is handed, by every caller."""
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        ctx = self.ctx
        loader = loader_of(ctx, loop.iter, scope)
        if loader is None:
            return self._handed_one_per_batch(loop.iter, scope)
        return one_per_batch(loader)

    def _handed_one_per_batch(self, iterable: ast.expr, scope: Scope) -> bool:
        """The loop reads a parameter of its function, bare or wrapped on the way
        (``loader = tqdm(valloader)``), and every caller hands in a loader of batch size
        1 (univnet's validation loader)."""
        ctx = self.ctx
        for _ in range(3):
            handed = iterated(ctx, iterable, scope)
            if not isinstance(handed, ast.Name):
                return False
            found = ctx.lookup(handed, scope)
            if found is None:
                return False
            binding, owner = found
            if not isinstance(owner, FunctionScope):
                return False
            if binding.kind is BindingKind.PARAMETER:
                return one_per_batch_wherever_passed(ctx, owner, handed.id)
            if binding.kind is not BindingKind.ASSIGN or binding.value is None:
                return False
            iterable = binding.value
        return False


def _unwrapped(value: ast.expr) -> ast.expr:
    """``loss.item()``, ``float(loss)``, ``loss.detach().cpu()``, ``loss.data`` -> ``loss``."""
    for _ in range(4):
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in _PASS_THROUGH_METHODS
            and not value.args
        ):
            value = value.func.value
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "float"
            and len(value.args) == 1
        ):
            value = value.args[0]
        elif isinstance(value, ast.Attribute) and value.attr == "data":
            value = value.value
        else:
            break
    return value


def _scalings(loop: ast.AST) -> list[tuple[tuple[int, int], str, ast.expr]]:
    """The in-place multiplications of a name in the loop, once per loop: ``loss *=
    len(y)``, ``loss.mul_(x.size(0))``, each with its position and factor."""
    found = []
    for node in ast.walk(loop):
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Mult)
            and isinstance(node.target, ast.Name)
        ):
            found.append(((node.lineno, node.col_offset), node.target.id, node.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "mul_"
            and isinstance(node.func.value, ast.Name)
            and len(node.args) == 1
        ):
            found.append(((node.lineno, node.col_offset), node.func.value.id, node.args[0]))
    return found


def _scaled_between(
    scalings: list[tuple[tuple[int, int], str, ast.expr]],
    name: str,
    binding: ast.AST,
    accumulation: ast.AST,
) -> bool:
    """Whether the loop multiplies ``name`` in place (:func:`_scalings`) after it is bound
    and before it is accumulated (pytorch-frame scales each batch mean to its batch's sum
    so). Like ``loss.item() * n`` written in the sum, any multiplier but a plain number
    changes what is added: the size of the batch, read however the code reads it, cannot
    be told from another run-time weight."""
    start = (getattr(binding, "end_lineno", None) or 0, getattr(binding, "end_col_offset", 0))
    end = (getattr(accumulation, "lineno", 0), getattr(accumulation, "col_offset", 0))
    return any(
        start <= position < end and scaled == name and not _is_number(factor)
        for position, scaled, factor in scalings
    )


def _is_number(expr: ast.expr) -> bool:
    """``0.5``, ``-2``: a constant factor, which scales a mean but counts nothing."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
    return isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float))


def _reduction_of(call: ast.Call) -> Reduction | None:
    """The reduction a loss call or constructor asks for (``None``: other or unknown)."""
    for keyword in call.keywords:
        if keyword.arg is None:
            return None  # **kwargs may carry it
        if keyword.arg == "reduction":
            value = keyword.value
            if isinstance(value, ast.Constant) and value.value in ("mean", "batchmean"):
                return Reduction.MEAN
            if isinstance(value, ast.Constant) and value.value == "sum":
                return Reduction.SUM
            return None
        if keyword.arg in ("size_average", "reduce"):
            return None  # the legacy arguments: leave them to the reader
    return Reduction.MEAN


def _counts(value: ast.expr) -> Divisor | None:
    """What a counter adds per pass: a batch's size (``y.size(0)``, ``len(x)``,
    ``x.shape[0]``) counts examples; ``1`` counts batches."""
    if isinstance(value, ast.Constant) and value.value == 1 and type(value.value) is int:
        return Divisor.BATCHES
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name) and func.id == "len" and len(value.args) == 1:
            return Divisor.EXAMPLES
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "size"
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Constant)
            and value.args[0].value == 0
        ):
            return Divisor.EXAMPLES
    if (
        isinstance(value, ast.Subscript)
        and isinstance(value.value, ast.Attribute)
        and value.value.attr == "shape"
        and isinstance(value.slice, ast.Constant)
        and value.slice.value == 0
    ):
        return Divisor.EXAMPLES
    return None


def _divisions(node: ast.AST) -> list[tuple[str, ast.expr]]:
    """``(name, divisor)`` for ``name / divisor`` and ``name /= divisor`` in a statement."""
    found = []
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div):
        found.append((ast.unparse(node.target), node.value))
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.BinOp)
            and isinstance(inner.op, ast.Div)
            and isinstance(inner.left, (ast.Name, ast.Attribute))
        ):
            found.append((ast.unparse(inner.left), inner.right))
    return found
