"""Probe 1, dtypes: float64 anywhere, mixed parameter dtypes, targets the loss rejects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.preflight.batch import iter_tensors
from torchdoctor.preflight.context import CheckContext
from torchdoctor.preflight.losses import LossKind
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

__all__ = ["float64_in_training", "mixed_parameter_dtypes", "target_dtype_for_loss"]

_LISTED = 5  # name at most this many tensors in a message
_NORM_LAYERS = ("BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "RMSNorm", "LocalResponse")


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def _float64_state(ctx: CheckContext) -> Iterator[Finding]:
    import torch

    params = [n for n, p in ctx.model.named_parameters() if p.dtype == torch.float64]
    buffers = [n for n, b in ctx.model.named_buffers() if b.dtype == torch.float64]
    total = sum(1 for _ in ctx.model.parameters())
    if params and len(params) == total:
        message = (
            f"All {total} parameters of {ctx.name('')} are float64: training takes twice "
            "the memory and runs far slower on GPUs (float64 throughput is 1/2 to 1/64 "
            "of float32)."
        )
        where = Location(object=ctx.name(""))
    elif params or buffers:
        message = (
            f"float64 tensors in the model: {_names(params + buffers)} "
            f"({len(params)} parameters, {len(buffers)} buffers); the rest is "
            "float32, so every op that meets them runs in float64 or fails."
        )
        where = Location(object=(params + buffers)[0])
    else:
        return
    yield finding(
        "TD102",
        message,
        where,
        Depth.CHECK,
        fix_hint="Build the model in float32 (`model.float()`); do not set "
        "`torch.set_default_dtype(torch.float64)` for training.",
        evidence={
            "float64_parameters": len(params),
            "float64_buffers": len(buffers),
            "parameters": total,
        },
    )


def _float64_batch(ctx: CheckContext) -> Iterator[Finding]:
    import torch

    batch = ctx.batch_as_given
    model_float64 = any(p.dtype == torch.float64 for p in ctx.model.parameters())
    effect = (
        "the model was made float64 to match it"
        if model_float64
        else "ops that meet it run in float64 or fail against the float32 weights"
    )
    for name, tensor in (
        *iter_tensors(batch.inputs, "inputs"),
        *iter_tensors(batch.targets, "targets"),
    ):
        if tensor.dtype != torch.float64:
            continue
        yield finding(
            "TD102",
            f"`{name}` (shape {list(tensor.shape)}) is float64, typically from "
            f"`torch.from_numpy` on a NumPy array (NumPy's default dtype); {effect}.",
            Location(object=name),
            Depth.CHECK,
            fix_hint="Convert it once when building the dataset: "
            "`torch.from_numpy(array).float()` or `array.astype(np.float32)`.",
            evidence={"tensor": name, "shape": list(tensor.shape)},
        )


@probe("TD102")
def float64_in_training(ctx: CheckContext, out: Reporter) -> None:
    """TD102: float64 parameters, buffers, inputs or targets."""
    for item in _float64_state(ctx):
        out.emit(item)
    for item in _float64_batch(ctx):
        out.emit(item)


@probe("TD103")
def mixed_parameter_dtypes(ctx: CheckContext, out: Reporter) -> None:
    """TD103: floating parameters of several dtypes (normalisation layers excepted)."""
    groups: dict[str, list[str]] = {}
    for path, module in ctx.model.named_modules():
        if type(module).__name__.startswith(_NORM_LAYERS):
            continue  # kept in float32 on purpose in half-precision models
        for name, param in module.named_parameters(recurse=False):
            if param.is_floating_point():
                groups.setdefault(str(param.dtype).replace("torch.", ""), []).append(
                    f"{path}.{name}" if path else name
                )
    if len(groups) < 2:
        return
    # float32 is the reference when present: the others are the ones cast by hand.
    reference = "float32" if "float32" in groups else max(groups, key=lambda k: len(groups[k]))
    others = [n for dtype, names in groups.items() if dtype != reference for n in names]
    counts = ", ".join(f"{len(names)} {dtype}" for dtype, names in groups.items())
    out.emit(
        finding(
            "TD103",
            f"The parameters have {len(groups)} dtypes ({counts}); not {reference}: "
            f"{_names(others)}. Ops between them need casts or fail, and the optimizer "
            "updates them at different precisions: a bfloat16 or float16 weight drops "
            "any update smaller than 1/256 or 1/2048 of its value.",
            Location(object=others[0]),
            Depth.CHECK,
            fix_hint=f"Keep every parameter in {reference} (`model.to(torch.{reference})`) and get "
            "the memory and speed of half precision from `torch.autocast`.",
            evidence={dtype: len(names) for dtype, names in groups.items()},
        )
    )


def _target_problem(kind: LossKind, scores: Any, target: Any) -> str | None:
    """Why ``target``'s dtype is wrong for ``kind``, or ``None`` when it is fine."""
    import torch

    dtype = str(target.dtype).replace("torch.", "")
    if kind.classifies:
        same_shape = target.shape == scores.shape
        if not same_shape and target.dtype not in (torch.int64, torch.uint8):
            return (
                f"class indices must be int64; they are {dtype}, and the loss raises "
                '"expected target dtype to be Long"'
            )
        if same_shape and not target.is_floating_point():
            return (
                f"targets of the output's shape are read as class probabilities and must "
                f"be floating; they are {dtype} (one-hot labels?)"
            )
        if same_shape and kind is LossKind.NLL:
            return "NLLLoss takes class indices, not per-class targets of the output's shape"
    elif kind in (LossKind.BCE, LossKind.BCE_WITH_LOGITS) and not target.is_floating_point():
        return f"binary targets must be floating (0.0/1.0); they are {dtype}"
    return None


_TARGET_HINTS = {
    True: "Pass class indices as int64: `targets.long()` (or `y.argmax(1)` for one-hot labels).",
    False: "Pass float targets: `targets.float()` (the same dtype as the output).",
}


@probe("TD104")
def target_dtype_for_loss(ctx: CheckContext, out: Reporter) -> None:
    """TD104: a target dtype the loss function cannot take."""
    import torch

    train = ctx.train_pass
    scores, target, kind = train.loss_input, train.loss_target, ctx.loss_kind
    if not isinstance(scores, torch.Tensor) or not isinstance(target, torch.Tensor):
        return
    problem = _target_problem(kind, scores, target)
    if problem is None:
        return
    out.emit(
        finding(
            "TD104",
            f"{ctx.loss_spec.name} gets targets of shape {list(target.shape)}, dtype "
            f"{str(target.dtype).replace('torch.', '')}, for outputs of shape "
            f"{list(scores.shape)}: {problem}.",
            Location(object="targets"),
            Depth.CHECK,
            fix_hint=_TARGET_HINTS[kind.classifies],
            evidence={
                "loss": ctx.loss_spec.name,
                "target_dtype": str(target.dtype),
                "target_shape": list(target.shape),
                "output_shape": list(scores.shape),
            },
        )
    )
