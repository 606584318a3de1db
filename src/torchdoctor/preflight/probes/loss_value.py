"""Probe 3, loss value: a non-finite loss, and a fresh model's loss far from ln C."""

from __future__ import annotations

import math
import os
from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.batch import iter_tensors
from torchdoctor.preflight.context import CheckContext
from torchdoctor.preflight.losses import LossKind
from torchdoctor.preflight.origin import non_finite_loss_op, non_finite_origin
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

__all__ = ["initial_loss", "non_finite_loss"]

# A fresh classifier's loss is about ln C; above this many times that (and at least one
# nat more) the output scale is wrong.
INITIAL_LOSS_FACTOR = 3.0


def _non_finite_parameters(ctx: CheckContext) -> list[str]:
    import torch

    return [
        name
        for name, tensor in (*ctx.model.named_parameters(), *ctx.model.named_buffers())
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
    ]


def _cause(ctx: CheckContext) -> tuple[str, Location]:
    """Where the first non-finite value appears: parameters, a module, or the loss itself."""
    import torch

    broken = _non_finite_parameters(ctx)
    if broken:
        return (
            f"the model already holds non-finite values in `{broken[0]}`"
            f"{f' and {len(broken) - 1} more tensors' if len(broken) > 1 else ''}",
            Location(object=broken[0]),
        )
    output = [t for _, t in iter_tensors(ctx.train_pass.output, "output") if t.is_floating_point()]
    if any(not bool(torch.isfinite(t).all()) for t in output):
        module = non_finite_origin(ctx)
        if module is not None:
            return (
                f"module `{ctx.name(module)}` turns finite inputs into non-finite outputs",
                Location(object=ctx.name(module)),
            )
        return "the model's output is non-finite", Location(object=ctx.name(""))
    culprit = non_finite_loss_op(ctx)
    if culprit is not None:
        op, where = culprit
        place = f" at {os.path.basename(where.path)}:{where.line}" if where.path else ""
        return (
            f"the model's output is finite, but `{op}`{place} inside the loss function "
            "turns finite values into NaN/Inf (a log or sqrt of a negative or zero value, "
            "a division by 0)",
            where,
        )
    return (
        "the model's output is finite, so the loss computation itself produces it (a log "
        "of 0, a division by 0)",
        Location(object="loss_fn"),
    )


@probe("TD213")
def non_finite_loss(ctx: CheckContext, out: Reporter) -> None:
    """TD213: the loss of the first batch is NaN or Inf (with finite data)."""
    import torch

    loss = ctx.train_pass.require_loss()
    if not isinstance(loss, torch.Tensor) or bool(torch.isfinite(loss).all()):
        return
    if not ctx.batch_is_finite:
        return  # TD401 names the cause
    cause, where = _cause(ctx)
    value = float(loss.float().mean()) if loss.numel() else float("nan")
    out.emit(
        finding(
            "TD213",
            f"The loss of the first batch is {value}: {cause}. Every gradient is "
            "non-finite and one optimizer step turns all the weights into NaN.",
            where,
            Depth.CHECK,
            fix_hint="Find the first op that produces NaN/Inf (clamp before log, add an epsilon "
            "to divisions, lower the learning rate or re-initialise broken weights).",
            evidence={"loss": value},
        )
    )


def _expected_loss(ctx: CheckContext, scores: Any) -> tuple[float, str] | None:
    """The loss of a model that predicts uniformly, with how it was derived."""
    kind = ctx.loss_kind
    if kind is LossKind.CROSS_ENTROPY or (
        kind is LossKind.NLL and ctx.train_pass.loss_input_op == "LogSoftmax"
    ):
        classes = ctx.num_classes
        if classes is None or classes < 2:
            return None
        return math.log(classes), f"ln({classes}) = {math.log(classes):.3f}"
    if kind in (LossKind.BCE_WITH_LOGITS, LossKind.BCE):
        return math.log(2), "ln(2) = 0.693"
    return None


@probe("TD307")
def initial_loss(ctx: CheckContext, out: Reporter) -> None:
    """TD307: a classifier's first loss far above what uniform predictions give."""
    import torch

    loss, scores = ctx.train_pass.require_loss(), ctx.train_pass.loss_input
    if (
        not isinstance(loss, torch.Tensor)
        or loss.numel() != 1
        or not isinstance(scores, torch.Tensor)
        or not bool(torch.isfinite(loss).all())
    ):
        return
    if ctx.loss_spec.reduction != "mean":
        return  # "sum" scales with the batch; "none" is reduced by the user's code
    expected = _expected_loss(ctx, scores)
    if expected is None:
        return
    value, (reference, derivation) = float(loss), expected
    if value <= max(reference * INITIAL_LOSS_FACTOR, reference + 1.0):
        return
    spread = float(scores.float().std()) if scores.numel() > 1 else 0.0
    out.emit(
        finding(
            "TD307",
            f"The first loss is {value:.4g}, but a model that has not learnt anything "
            f"should give about {derivation}: the output scores are far too large "
            f"(std {spread:.3g}), so the first steps only shrink them.",
            Location(object=ctx.name(ctx.train_pass.loss_input_module or "")),
            Depth.CHECK,
            fix_hint="Initialise the last layer small (PyTorch's default, or `std=0.01`), "
            "normalise the inputs, and check the loss's reduction.",
            evidence={"loss": value, "expected": reference, "output_std": spread},
        )
    )
