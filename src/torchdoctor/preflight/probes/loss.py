"""Probe 3, loss wiring: what the loss receives, and what it gives for a fresh model."""

from __future__ import annotations

import math
from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Confidence, Depth, Location
from torchdoctor.preflight.context import CheckContext
from torchdoctor.preflight.losses import LossKind
from torchdoctor.preflight.origin import loss_input_location
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

__all__ = [
    "activation_before_loss",
    "loss_target_broadcast",
    "single_logit_cross_entropy",
    "single_logit_scores",
]

_TOLERANCE = 1e-3


def _class_dim(scores: Any) -> int:
    return 1 if scores.dim() >= 2 else 0


def _looks_like_probabilities(scores: Any) -> bool:
    if scores.numel() == 0 or scores.shape[_class_dim(scores)] < 2:
        return False
    sums = scores.float().sum(_class_dim(scores))
    in_range = bool((scores >= 0).all()) and bool((scores <= 1).all())
    return in_range and bool(((sums - 1).abs() < _TOLERANCE).all())


def _looks_like_log_probabilities(scores: Any) -> bool:
    if scores.numel() == 0 or scores.shape[_class_dim(scores)] < 2:
        return False
    total = scores.float().logsumexp(_class_dim(scores))
    return bool((scores <= _TOLERANCE).all()) and bool((total.abs() < _TOLERANCE).all())


def _scores(ctx: CheckContext) -> Any | None:
    import torch

    scores = ctx.train_pass.loss_input
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():
        return None
    return scores if bool(torch.isfinite(scores).all()) else None


def _applied(ctx: CheckContext, scores: Any) -> tuple[str | None, Confidence]:
    """Which normalisation the scores went through, seen in the graph or in the values."""
    op = ctx.train_pass.loss_input_op
    if op in ("Softmax", "LogSoftmax", "Sigmoid"):
        return op, Confidence.HIGH
    if _looks_like_probabilities(scores):
        return "Softmax", Confidence.MEDIUM
    if _looks_like_log_probabilities(scores):
        return "LogSoftmax", Confidence.MEDIUM
    return None, Confidence.HIGH


_WIRING: dict[tuple[LossKind, str | None], tuple[str, str, str]] = {
    # (loss kind, op the scores went through) -> (code, what happens, fix)
    (LossKind.CROSS_ENTROPY, "Softmax"): (
        "TD301",
        "CrossEntropyLoss applies log_softmax itself, so softmax runs twice: with C "
        "classes the loss is trapped between ln(e + C - 1) - 1 and ln(e + C - 1) ({low:.2f} "
        "to {high:.2f} here), gradients are scaled down by the extra softmax, and training "
        "stalls or learns far slower",
        "Return raw logits from the model (drop the final softmax); apply softmax only for "
        "predictions.",
    ),
    (LossKind.CROSS_ENTROPY, "LogSoftmax"): (
        "TD302",
        "CrossEntropyLoss applies log_softmax again; log_softmax is idempotent, so the "
        "loss and gradients are unchanged, but the extra op costs time and memory and hides "
        "whether the model returns logits",
        "Drop the log_softmax and keep CrossEntropyLoss, or keep it and use NLLLoss.",
    ),
    (LossKind.BCE_WITH_LOGITS, "Sigmoid"): (
        "TD303",
        "BCEWithLogitsLoss applies sigmoid itself, so it runs twice: predictions are "
        "squeezed into (0.5, 0.73), the loss cannot go near 0, and the model barely learns",
        "Return raw logits from the model (drop the final sigmoid); apply sigmoid only for "
        "predictions.",
    ),
}


_RECEIVED = {
    "Softmax": "probabilities (softmax output)",
    "LogSoftmax": "log-probabilities (log_softmax output)",
    "Sigmoid": "sigmoid outputs",
    None: "raw scores",
}

_NLL_EFFECT = {
    "Softmax": "NLLLoss only negates the target's entry, so the loss is -p[target], stuck in "
    "[-1, 0], and its gradient ignores every other class",
    None: "NLLLoss only negates the target's entry, so the loss is unbounded below and the "
    "model learns to inflate the target's score instead of separating the classes",
}


def _nll_gets_log_probabilities(ctx: CheckContext, scores: Any) -> bool:
    """NLL inputs built from log_softmax (then masked, scaled or focal-weighted), or <= 0
    everywhere: log-probabilities scaled by weights in [0, 1]. Either way the loss is
    bounded below, which raw scores never are."""
    if "LogSoftmax" in ctx.train_pass.loss_input_sources:
        return True
    return ctx.train_pass.loss_input_op != "Softmax" and bool((scores <= _TOLERANCE).all())


def _wiring(kind: LossKind, op: str | None, scores: Any) -> tuple[str, str, str] | None:
    """(code, effect, fix) for a loss of ``kind`` fed scores that went through ``op``."""
    if kind is LossKind.NLL and op != "LogSoftmax":
        return (
            "TD305",
            _NLL_EFFECT["Softmax" if op == "Softmax" else None],
            "Apply `log_softmax(dim=1)` before NLLLoss, or use CrossEntropyLoss on the raw logits.",
        )
    if (kind, op) not in _WIRING:
        return None
    code, effect, fix = _WIRING[(kind, op)]
    high = math.log(math.e + scores.shape[_class_dim(scores)] - 1)
    return code, effect.format(low=high - 1, high=high), fix


@probe("TD301", "TD302", "TD303", "TD305")
def activation_before_loss(ctx: CheckContext, out: Reporter) -> None:
    """TD301/302/303/305: the loss receives scores of the wrong kind."""
    scores = _scores(ctx)
    if scores is None:
        return
    if ctx.loss_kind is LossKind.NLL and _nll_gets_log_probabilities(ctx, scores):
        return
    op, confidence = _applied(ctx, scores)
    wiring = _wiring(ctx.loss_kind, op, scores)
    if wiring is None:
        return
    code, effect, fix = wiring
    if code == "TD305":
        confidence = Confidence.HIGH  # the values themselves are not log-probabilities
    module = ctx.train_pass.loss_input_module
    source = (
        f"the output of `{module}` ({type(ctx.model.get_submodule(module)).__name__})"
        if module
        else "from the model's forward"
    )
    if op is None:
        total = float(scores.float().logsumexp(_class_dim(scores)).mean())
        seen = f"each row's logsumexp is {total:.3g} on average, not 0"
    else:
        seen = (
            "seen in the autograd graph" if confidence is Confidence.HIGH else "every row sums to 1"
        )
    out.emit(
        finding(
            code,
            f"{ctx.loss_spec.name} receives {_RECEIVED[op]} of shape {list(scores.shape)}, "
            f"{source} ({seen}): {effect}.",
            loss_input_location(ctx, module),
            Depth.CHECK,
            fix_hint=fix,
            confidence=confidence,
            evidence={
                "loss": ctx.loss_spec.name,
                "op": op,
                "shape": list(scores.shape),
                "min": float(scores.min()),
                "max": float(scores.max()),
            },
        )
    )


def _broadcast_shape(first: Any, second: Any) -> tuple[int, ...] | None:
    import torch

    try:
        return tuple(torch.broadcast_shapes(first, second))  # type: ignore[no-untyped-call]
    except RuntimeError:
        return None


def _broadcast_mode(shapes: tuple[Any, Any], seen: list[str]) -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    class _Watch(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            result = func(*args, **(kwargs or {}))
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if (
                not seen
                and len(tensors) == 2
                and isinstance(result, torch.Tensor)
                and {tuple(t.shape) for t in tensors} == set(shapes)
                and result.numel() > max(t.numel() for t in tensors)
            ):
                seen.append(getattr(func, "__name__", "an op"))
            return result

    return _Watch()


def _broadcasts_inside(ctx: CheckContext, output: Any, target: Any) -> bool:
    """For an unknown loss: does an op inside it combine the output and the target
    shapes into a larger, broadcast result?"""
    import torch

    seen: list[str] = []
    try:
        with torch.no_grad(), _broadcast_mode((tuple(output.shape), tuple(target.shape)), seen):
            ctx.loss_fn(output, target, *ctx.batch.extra)
    except Exception:  # noqa: BLE001 - the shared pass already reported a failing loss
        return False
    return bool(seen)


@probe("TD306")
def loss_target_broadcast(ctx: CheckContext, out: Reporter) -> None:
    """TD306: output and target shapes differ and an elementwise loss broadcasts them."""
    import torch

    train = ctx.train_pass
    scores, target, kind = train.loss_input, train.loss_target, ctx.loss_kind
    if not isinstance(scores, torch.Tensor) or not isinstance(target, torch.Tensor):
        return
    if scores.shape == target.shape or not (kind.elementwise or kind is LossKind.OTHER):
        return
    shape = _broadcast_shape(scores.shape, target.shape)
    if shape is None or math.prod(shape) <= max(scores.numel(), target.numel()):
        return
    if kind is LossKind.OTHER and not _broadcasts_inside(ctx, scores, target):
        return
    n = math.prod(shape)
    out.emit(
        finding(
            "TD306",
            f"{ctx.loss_spec.name} compares outputs of shape {list(scores.shape)} with "
            f"targets of shape {list(target.shape)}; they broadcast to {list(shape)}, so "
            f"the loss averages {n} pairs instead of {scores.numel()}, almost all of them "
            "an output against another example's target.",
            Location(object="targets"),
            Depth.CHECK,
            fix_hint="Give the output and the target the same shape: `output.squeeze(-1)` or "
            "`target.view_as(output)`.",
            evidence={
                "output_shape": list(scores.shape),
                "target_shape": list(target.shape),
                "broadcast_shape": list(shape),
            },
        )
    )


def single_logit_scores(ctx: CheckContext) -> Any | None:
    """The scores when a classification loss gets one score per example (class dimension
    of size 1), else ``None``: ``log_softmax`` over one class is exactly 0."""
    import torch

    scores = ctx.train_pass.loss_input
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():
        return None
    if (
        ctx.loss_kind is LossKind.NLL
        and "LogSoftmax" not in ctx.train_pass.loss_input_sources
        and ctx.train_pass.loss_input_op != "LogSoftmax"
    ):
        return None
    if not ctx.loss_kind.classifies or scores.dim() < 2 or scores.shape[1] != 1:
        return None
    return scores


@probe("TD308")
def single_logit_cross_entropy(ctx: CheckContext, out: Reporter) -> None:
    """TD308: cross-entropy over a single class, a loss that is constant by construction."""
    scores = single_logit_scores(ctx)
    if scores is None:
        return
    loss = ctx.train_pass.require_loss()
    out.emit(
        finding(
            "TD308",
            f"The model gives `{ctx.loss_spec.name}` one score per example (shape "
            f"{list(scores.shape)}): a cross-entropy over a single class, where `log_softmax` is "
            f"exactly 0, so the loss is constant ({float(loss):.4g}) and every gradient is "
            "exactly zero. The model never learns.",
            loss_input_location(ctx, None),
            Depth.CHECK,
            fix_hint="For a yes/no target, use `BCEWithLogitsLoss` on the single logit "
            "(`target.float()`); for C classes give the last layer C outputs.",
            evidence={"scores_shape": list(scores.shape), "loss": float(loss)},
        )
    )
