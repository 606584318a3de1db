"""Probe 2, data sanity: non-finite values, unnormalised inputs, class indices."""

from __future__ import annotations

from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.batch import iter_tensors
from torchdoctor.preflight.context import CheckContext
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

__all__ = [
    "class_index_out_of_range",
    "inputs_not_normalised",
    "non_finite_inputs",
    "single_class_batch",
]

# Per-feature root mean square above which inputs are "not normalised": standardised data
# has about 1, images in [0, 1] about 0.5, raw 0-255 pixels about 150.
NORMALISED_RMS_LIMIT = 10.0
_FEATURES_LAST = ("Linear", "Bilinear", "RNN", "LSTM", "GRU", "MultiheadAttention")
# Examples needed before a single-class batch means something (binary data is often
# imbalanced enough that small batches of one class are normal).
MIN_EXAMPLES_MULTICLASS = 8
MIN_EXAMPLES_BINARY = 128


@probe("TD401")
def non_finite_inputs(ctx: CheckContext, out: Reporter) -> None:
    """TD401: NaN or Inf in the inputs or targets of the batch."""
    import torch

    batch = ctx.batch_as_given
    for name, tensor in (
        *iter_tensors(batch.inputs, "inputs"),
        *iter_tensors(batch.targets, "targets"),
    ):
        if not tensor.is_floating_point() and not tensor.is_complex():
            continue
        bad = ~torch.isfinite(tensor)
        count = int(bad.sum())
        if not count:
            continue
        nans = int(torch.isnan(tensor).sum())
        example = int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0, 0]) if bad.dim() else 0
        out.emit(
            finding(
                "TD401",
                f"`{name}` (shape {list(tensor.shape)}) holds {count} non-finite values "
                f"({nans} NaN, {count - nans} Inf) of {tensor.numel()}, the first in "
                f"example {example}; every loss and gradient they touch becomes NaN.",
                Location(object=name),
                Depth.CHECK,
                fix_hint="Clean the data where it is built: impute or drop missing values "
                "(`torch.nan_to_num`, `dropna()`), and guard divisions and logs.",
                evidence={
                    "nan": nans,
                    "inf": count - nans,
                    "values": tensor.numel(),
                    "first_example": example,
                },
            )
        )


def _feature_dim(layer: Any, tensor: Any) -> int:
    if tensor.dim() <= 1:
        return 0
    return tensor.dim() - 1 if type(layer).__name__.startswith(_FEATURES_LAST) else 1


def _feature_stats(tensor: Any, dim: int) -> tuple[Any, Any]:
    """Per-feature mean and root mean square along ``dim``."""
    flat = tensor.detach().float().movedim(dim, 0).reshape(tensor.shape[dim], -1)
    return flat.mean(1), flat.pow(2).mean(1).sqrt()


@probe("TD402")
def inputs_not_normalised(ctx: CheckContext, out: Reporter) -> None:
    """TD402: the first layer with a weight matrix reads inputs of a large scale."""
    first = ctx.train_pass.trace.first_input
    if first is None:
        return
    path, tensor = first
    if not hasattr(tensor, "is_floating_point") or not tensor.is_floating_point():
        return
    if tensor.numel() == 0 or not bool(tensor.isfinite().all()):
        return  # TD401 covers non-finite data
    layer = ctx.model.get_submodule(path)
    dim = _feature_dim(layer, tensor)
    means, rms = _feature_stats(tensor, dim)
    worst = int(rms.argmax())
    if float(rms[worst]) <= NORMALISED_RMS_LIMIT:
        return
    large = int((rms > NORMALISED_RMS_LIMIT).sum())
    low, high = float(tensor.min()), float(tensor.max())
    unit = "features" if dim == tensor.dim() - 1 or tensor.dim() == 2 else "channels"
    out.emit(
        finding(
            "TD402",
            f"The first layer `{ctx.name(path)}` ({type(layer).__name__}) reads inputs in "
            f"[{low:.4g}, {high:.4g}]; {large} of {rms.numel()} input {unit} "
            f"{'has' if large == 1 else 'have'} a root "
            f"mean square above {NORMALISED_RMS_LIMIT:g} ({unit[:-1]} {worst}: mean "
            f"{float(means[worst]):.4g}, rms {float(rms[worst]):.4g}). Large inputs "
            "saturate activations and make the first layer's gradients dominate.",
            Location(object=ctx.name(path)),
            Depth.CHECK,
            fix_hint="Normalise the inputs: scale pixels to [0, 1] and standardise each feature "
            "with the training set's mean and std (`(x - mean) / std`).",
            evidence={
                "min": low,
                "max": high,
                "features_over_limit": large,
                "worst_feature": worst,
                "worst_rms": float(rms[worst]),
            },
        )
    )


def _class_targets(ctx: CheckContext) -> Any | None:
    """Integer class-index targets with the ignored index removed, or ``None``."""
    import torch

    scores, target = ctx.train_pass.loss_input, ctx.train_pass.loss_target
    if not ctx.loss_kind.classifies or not isinstance(target, torch.Tensor):
        return None
    if not isinstance(scores, torch.Tensor) or target.shape == scores.shape:
        return None  # class probabilities, not indices
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        return None  # TD104's business
    return target[target != ctx.loss_spec.ignore_index].reshape(-1)


@probe("TD403")
def class_index_out_of_range(ctx: CheckContext, out: Reporter) -> None:
    """TD403: a class index below 0 or at least the number of outputs."""
    target, classes = _class_targets(ctx), ctx.num_classes
    if target is None or classes is None or target.numel() == 0:
        return
    low, high = int(target.min()), int(target.max())
    if low >= 0 and high < classes:
        return
    outside = int(((target < 0) | (target >= classes)).sum())
    one_based = " The labels look 1-based." if low == 1 and high == classes else ""
    out.emit(
        finding(
            "TD403",
            f"Targets hold class indices {low}..{high} but the model outputs {classes} "
            f"classes (valid: 0..{classes - 1}); {outside} of {target.numel()} targets are "
            "out of range. On CPU the loss raises; on CUDA it fails with a device-side "
            f"assert far from the cause.{one_based}",
            Location(object="targets"),
            Depth.CHECK,
            fix_hint=(
                "Subtract 1 from the labels (`targets - 1`)."
                if one_based
                else f"Map the labels to 0..{classes - 1}, or give the last layer "
                f"{high + 1} outputs."
            ),
            evidence={"min": low, "max": high, "classes": classes, "out_of_range": outside},
        )
    )


def _targets_of(ctx: CheckContext, raw: Any) -> Any:
    if ctx.runner is not None:  # a step's targets are known for the first batch only
        return ctx.batch_as_given.targets if raw is ctx.raw_batch else None
    return ctx.split(raw).targets


def _labels_seen(ctx: CheckContext, needed: int) -> tuple[set[int], int, int]:
    """Distinct labels, examples and batches seen, reading batches until ``needed``."""
    import torch

    labels: set[int] = set()
    examples = batches = 0
    for raw in ctx.peek_batches(4):
        target = _targets_of(ctx, raw)
        if not isinstance(target, torch.Tensor) or target.is_floating_point():
            return set(), 0, 0
        target = target[target != ctx.loss_spec.ignore_index]
        labels |= {int(v) for v in target.unique()[:2]}  # type: ignore[no-untyped-call]
        examples, batches = examples + target.numel(), batches + 1
        if len(labels) > 1 or examples >= needed:
            break
    return labels, examples, batches


@probe("TD404")
def single_class_batch(ctx: CheckContext, out: Reporter) -> None:
    """TD404: every target of the batch (or the first few batches) is one class."""
    if _class_targets(ctx) is None or ctx.num_classes is None:
        return
    binary = ctx.num_classes <= 2
    needed = MIN_EXAMPLES_BINARY if binary else MIN_EXAMPLES_MULTICLASS
    labels, examples, batches = _labels_seen(ctx, needed)
    if len(labels) != 1 or examples < needed:
        return
    label = next(iter(labels))
    span = "the batch" if batches == 1 else f"the first {batches} batches"
    out.emit(
        finding(
            "TD404",
            f"All {examples} targets of {span} are class {label} (the model has "
            f"{ctx.num_classes} classes): each step pushes every prediction towards one "
            "class, and the loss curve swings from batch to batch.",
            Location(object="targets"),
            Depth.CHECK,
            fix_hint="Shuffle the training data (`DataLoader(..., shuffle=True)`), and check "
            "that the labels are read from the right column.",
            evidence={"class": label, "examples": examples, "batches": batches},
        )
    )
