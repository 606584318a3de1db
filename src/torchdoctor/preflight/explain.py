"""Failures of the user's forward or loss that a rule explains.

When the model's forward or the loss raises, these functions recognise the errors that
are symptoms of a catalogued problem (tensors on two devices, float64 inputs, class
indices as floats, an out-of-range class index, mismatched target shapes) and turn them
into that rule's finding. Anything else stays a :class:`~torchdoctor.errors.UserCodeError`.
The probes usually find the same problem first, with a richer message; the engine keeps
these only for codes no probe reported.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.preflight.failures import error_location
from torchdoctor.preflight.losses import recognise_loss
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.losses import LossCall
    from torchdoctor.preflight.protocols import FailureContext

__all__ = ["forward_failure", "is_device_error", "loss_failure"]

_DEVICE = re.compile(
    r"same device|on the expected device|Expected object of device|expected it to be on|"
    r"is on CPU, but expected|at least two devices|device-side assert",
    re.IGNORECASE,
)
_TYPE_PAIR = re.compile(r"Input type \(([\w.]+)\) and weight type \(([\w.]+)\)")
_DTYPE = re.compile(
    r"same dtype|expected scalar type|should be the same|"
    r"found dtype|expected m1 and m2",
    re.IGNORECASE,
)
_FLOAT64 = re.compile(r"double|float64", re.IGNORECASE)
_TARGET_DTYPE = re.compile(
    r"target dtype|expected scalar type Long|can't be cast to the "
    r"desired output type|Found dtype \w+ but expected",
    re.IGNORECASE,
)
_OUT_OF_BOUNDS = re.compile(r"out of bounds|device-side assert", re.IGNORECASE)
_TARGET_SIZE = re.compile(r"target size", re.IGNORECASE)
_BATCHNORM_ONE = "Expected more than 1 value per channel when training"


def is_device_error(error: BaseException) -> bool:
    """Whether ``error`` says that tensors on different devices met."""
    text = str(error)
    pair = _TYPE_PAIR.search(text)
    if pair and ("cuda" in pair.group(1)) != ("cuda" in pair.group(2)):
        return True
    return bool(_DEVICE.search(text))


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def forward_failure(
    ctx: FailureContext, error: BaseException, module: str | None
) -> Finding | None:
    """The finding that explains a failed forward, or ``None``."""
    where = error_location(error, ctx.name(module) if module is not None else None)
    if is_device_error(error):
        return finding(
            "TD101",
            f"The forward failed because tensors on different devices met: {_first_line(error)}",
            where,
            Depth.CHECK,
            fix_hint="Create tensors inside `forward` on the input's device "
            "(`device=x.device`) and register constant tensors as buffers.",
            evidence={"error": _first_line(error)},
        )
    if _BATCHNORM_ONE in str(error):
        return finding(
            "TD503",
            f"The forward failed because a BatchNorm layer in training mode received a "
            f"batch of one example: {_first_line(error)}",
            where,
            Depth.CHECK,
            fix_hint="Train with batches of at least 2 examples, or use `nn.GroupNorm` / "
            "`nn.LayerNorm`, which do not depend on the batch.",
            evidence={"error": _first_line(error)},
        )
    if not _DTYPE.search(str(error)):
        return None
    if _FLOAT64.search(str(error)) and _batch_has_float64(ctx):
        return finding(
            "TD102",
            f"The forward failed because float64 inputs met float32 weights: {_first_line(error)}",
            where,
            Depth.CHECK,
            fix_hint="Convert the inputs to float32 when building the dataset "
            "(`torch.from_numpy(a).float()`).",
            evidence={"error": _first_line(error)},
        )
    return None


def _batch_has_float64(ctx: FailureContext) -> bool:
    import torch

    from torchdoctor.preflight.batch import iter_tensors

    return any(t.dtype == torch.float64 for _, t in iter_tensors(ctx.batch.inputs, "inputs"))


def loss_failure(
    ctx: FailureContext, error: BaseException, call: LossCall | None
) -> Finding | None:
    """The finding that explains a failed loss call, or ``None``."""
    text = str(error)
    where = error_location(error)
    if where.path is None:
        where = Location(object="loss_fn")
    evidence = {"error": _first_line(error)}
    if _TARGET_DTYPE.search(text):
        return finding(
            "TD104",
            f"The loss failed on the target's dtype: {_first_line(error)}",
            where,
            Depth.CHECK,
            evidence=evidence,
            fix_hint="Give the loss targets of the dtype it expects: int64 class "
            "indices for cross-entropy/NLL, float for BCE and MSE.",
        )
    # Not ctx.loss_kind: that may ask for the training pass this failure belongs to.
    kind = call.spec.kind if call is not None else recognise_loss(ctx.loss_fn).kind
    if _OUT_OF_BOUNDS.search(text) and kind.classifies:
        return finding(
            "TD403",
            f"The loss failed on a class index: {_first_line(error)}",
            where,
            Depth.CHECK,
            evidence=evidence,
            fix_hint="Map the labels to 0..C-1, or give the model C outputs.",
        )
    if _TARGET_SIZE.search(text):
        return finding(
            "TD306",
            f"The loss failed on mismatched shapes: {_first_line(error)}",
            where,
            Depth.CHECK,
            evidence=evidence,
            fix_hint="Give the output and the target the same shape "
            "(`output.squeeze(-1)` or `target.unsqueeze(-1)`).",
        )
    return None
