"""Can it learn: the overfit-one-batch test (TD605) and the first update's size relative to
the weights, per parameter group (TD606).

Both come from one run on a copy of the model and optimizer: a few seeded steps on the one
batch, the first of them measured (TD606's findings are worded in
:mod:`torchdoctor.preflight.updates`). When the loss does not fall clearly, the probe names
the cause it measured (no gradient, a constant loss, a loss that rose, a loss that turned
NaN and why, gradients that vanish or dead ReLUs, an optimizer that is merely too slow
next to ``Adam(lr=1e-3)``) instead of a bare verdict. Problems that have rules of their own
and make the run meaningless (NaN in the batch, a NaN first loss, NaN gradients) leave
TD605 quiet.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.preflight.describe import describe_optimizer
from torchdoctor.preflight.flow import dead_relu_sites, vanishing
from torchdoctor.preflight.overfit import (
    CLEAR_DROP,
    SOME_DROP,
    Trajectory,
    dropped,
    reference_run,
    run_steps,
    use_peak_rates,
)
from torchdoctor.preflight.probes.optimizer import holds_copies
from torchdoctor.preflight.registry import probe
from torchdoctor.preflight.training import CopyUnavailable, copy_for_training, is_finite
from torchdoctor.preflight.updates import RATIO_HIGH, update_findings
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext


@probe("TD605", "TD606")
def learns_one_batch(ctx: CheckContext, out: Reporter) -> None:
    """Train a copy on the one batch: report a model that cannot fit it (TD605) and
    parameter groups whose first update is out of band (TD606)."""
    start = loss_value(ctx.train_pass.require_loss())
    if start is None or not is_finite(start) or abs(start) < 1e-6:
        return  # a non-finite loss has its own rule; a zero loss has nothing to learn
    if not ctx.batch_is_finite or not _gradients_finite(ctx):
        return  # NaN data (TD401) or NaN gradients (TD212) break training, not the fit
    blocked = _no_gradient(ctx)
    if blocked is not None:
        if ctx.enabled("TD605"):
            out.emit(blocked)
        return
    if ctx.optimizer is not None and holds_copies(ctx):
        return  # the optimizer steps copies of the parameters: TD620 names that cause
    if ctx.optimizer is None:
        if ctx.enabled("TD605"):
            reference = reference_run(ctx)
            if not dropped(reference.losses, SOME_DROP):
                out.emit(_second_opinion_failed(ctx, None, reference))
        return
    try:
        training = copy_for_training(ctx)
    except CopyUnavailable:
        return
    at_peak = use_peak_rates(training.optimizer)
    described = describe_optimizer(training.optimizer)
    if at_peak:
        described += " (its schedule's peak rate)"
    trajectory = run_steps(ctx, training, measure=True)
    ctx.curves["overfit_loss"] = [float(loss) for loss in trajectory.losses]
    if ctx.enabled("TD606"):
        for item in update_findings(trajectory.updates, described):
            out.emit(item)
    if ctx.enabled("TD605"):
        for item in _verdict(ctx, trajectory, described):
            out.emit(item)


def _gradients_finite(ctx: CheckContext) -> bool:
    import torch

    return all(
        bool(torch.isfinite(g).all()) for g in ctx.train_pass.gradients.values() if g is not None
    )


def _location(ctx: CheckContext) -> Location:
    return Location(object=ctx.name(""))


def loss_value(loss: Any) -> float | None:
    """The loss as one float (the mean of a non-scalar loss), or ``None``."""
    if hasattr(loss, "detach"):
        return float(loss.detach().float().mean())
    try:
        return float(loss)
    except (TypeError, ValueError):
        return None


_DETACHED_HINT = (
    "Compute the loss with torch operations on the model's output, without "
    "`.item()`, `.detach()` or conversions, and return that tensor."
)


def _no_gradient(ctx: CheckContext) -> Finding | None:
    train_pass = ctx.train_pass
    grads = [g for g in train_pass.gradients.values() if g is not None]
    hint = _DETACHED_HINT
    if not train_pass.gradients:
        return None  # nothing requires grad: a frozen model is not a learning problem
    if train_pass.backward_error is not None:
        cause = f"the loss cannot be backpropagated: {train_pass.backward_error}"
    elif not grads:
        cause = (
            "no parameter received a gradient: the loss is cut off from the model "
            "(computed through `.item()`, `.detach()`, numpy, `torch.tensor(...)` or "
            "an `argmax`)"
        )
    elif not any(bool(g.ne(0).any()) for g in grads):
        cause = "every gradient is exactly zero"
        hint = (
            "Look for a step function between the parameters and the loss (`round`, "
            "`sign`, a comparison, `argmax`) or an all-zero initialisation, both of "
            "which give zero gradients."
        )
    else:
        return None
    return finding(
        "TD605",
        f"The model cannot learn from this batch: {cause}.",
        _location(ctx),
        Depth.CHECK,
        fix_hint=hint,
        evidence={
            "loss": loss_value(train_pass.loss),
            "parameters_with_gradient": len(grads),
            "trainable_parameters": len(train_pass.gradients),
        },
    )


def _evidence(trajectory: Trajectory, label: str) -> dict[str, Any]:
    losses = trajectory.losses
    return {
        f"{label}_steps": len(losses) - 1 if len(losses) > 1 else len(losses),
        f"{label}_first_loss": losses[0],
        f"{label}_last_loss": losses[-1],
        f"{label}_min_loss": min(losses),
    }


def _verdict(ctx: CheckContext, trajectory: Trajectory, described: str) -> Iterator[Finding]:
    """TD605 from the user's optimizer's run, asking Adam for a second opinion only when
    the run made no progress."""
    if trajectory.learned:
        return
    steps = len(trajectory.losses) - 1
    if not trajectory.finite:
        yield _turned_non_finite(ctx, trajectory, described)
        return
    if not trajectory.moved:
        yield _found(
            ctx,
            f"{steps} steps of {described} on one batch changed no parameter "
            f"and the loss stayed at {trajectory.initial:.4g}: {_why_unmoved(ctx)}.",
            "Give the optimizer the model's trainable parameters and a learning rate above zero.",
            _evidence(trajectory, "optimizer"),
        )
        return
    last = trajectory.losses[-1]
    if last - trajectory.initial >= CLEAR_DROP * abs(trajectory.initial):
        yield _found(
            ctx,
            f"The loss rose from {trajectory.initial:.4g} to {last:.4g} in "
            f"{steps} steps of {described} on one batch: the updates overshoot.",
            "Lower the learning rate (try 10x smaller).",
            _evidence(trajectory, "optimizer"),
        )
        return
    if dropped(trajectory.losses, SOME_DROP):
        return  # slower than an early stop, but the whole chain learns
    reference = reference_run(ctx)
    if not dropped(reference.losses, SOME_DROP):
        yield _second_opinion_failed(ctx, trajectory, reference, described)
    else:
        yield _found(
            ctx,
            f"{described} barely moves the loss on one batch ({trajectory.initial:.4g} "
            f"to {last:.4g} in {steps} steps), while {reference.optimizer} on another "
            f"copy lowers it to {reference.losses[-1]:.4g} in {len(reference.losses) - 1}: "
            "the learning rate is too small for this model.",
            "Raise the learning rate (try 10x) or check that the loss is not scaled down.",
            {**_evidence(trajectory, "optimizer"), **_evidence(reference, "reference")},
            severity=Severity.INFO,
        )


def _turned_non_finite(ctx: CheckContext, trajectory: Trajectory, described: str) -> Finding:
    """TD605 for a loss that turned NaN/Inf during the run, with the cause measured: steps
    far too large, a gradient that turned non-finite, or a forward that did."""
    losses = trajectory.losses
    bad = next(i for i, loss in enumerate(losses) if not is_finite(loss))
    largest = max((u.ratio for u in trajectory.updates if is_finite(u.ratio)), default=0.0)
    rose = bad > 1 and losses[bad - 1] - losses[0] >= CLEAR_DROP * abs(losses[0])
    went = (
        f"Training a copy on the one batch with {described}, the loss went from "
        f"{trajectory.initial:.4g} to {losses[bad]} after {bad} step{'s' * (bad != 1)}"
    )
    evidence = {
        **_evidence(trajectory, "optimizer"),
        "first_update_ratio": largest,
        "weights_finite": trajectory.weights_finite,
    }
    if largest > RATIO_HIGH or rose:
        shown = (
            f" (the first changed the weights by {largest:.3g} of their norm)"
            if (largest > RATIO_HIGH)
            else " (the loss rose first)"
        )
        return _found(
            ctx,
            f"{went}: the updates are far too large{shown}.",
            "Lower the learning rate (try 10x smaller) or clip the gradients.",
            evidence,
        )
    size = f"updates of {largest:.3g} of the weights' norm" if largest else "moderate updates"
    if not trajectory.weights_finite:
        return _found(
            ctx,
            f"{went}, with {size}: a gradient turned NaN/Inf at the weights training "
            "reached, although the loss before it was finite (the backward of a sqrt or "
            "norm at 0, a log of 0, a division by 0).",
            "Add an epsilon inside sqrt/log/division on the gradient's path "
            "(`torch.sqrt(x + 1e-12)`) or clamp their input.",
            evidence,
        )
    return _found(
        ctx,
        f"{went}, with {size} and weights that are still finite: the forward or the "
        "loss produces NaN/Inf at the weights training reached (an overflow in exp, a log "
        "of 0, a division by 0).",
        "Use numerically stable forms (`log_softmax`, `logsumexp`, `BCEWithLogitsLoss`) and "
        "add an epsilon to divisions and logs.",
        evidence,
    )


def _why_unmoved(ctx: CheckContext) -> str:
    optimizer: Any = ctx.optimizer
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    graded = [
        p for n, p in ctx.model.named_parameters() if ctx.train_pass.gradients.get(n) is not None
    ]
    if not any(id(p) in held for p in graded):
        return "the optimizer holds none of the parameters that receive gradients"
    graded_ids = {id(p) for p in graded}
    lrs = [
        group.get("lr")
        for group in optimizer.param_groups
        if any(id(p) in graded_ids for p in group["params"])
    ]
    if lrs and all(float(lr) == 0.0 for lr in lrs):
        return "the learning rate is 0"
    return "no update changes the model (check the learning rate and the optimizer)"


def _second_opinion_failed(
    ctx: CheckContext, trajectory: Trajectory | None, reference: Trajectory, described: str = ""
) -> Finding:
    """TD605 when Adam made no progress either: a loss that turned NaN/Inf under Adam is
    that numerical problem, not proof that the model cannot fit the batch."""
    if not reference.finite:
        return _turned_non_finite(ctx, reference, reference.optimizer)
    return _cannot_fit(ctx, trajectory, reference, described)


def _cannot_fit(
    ctx: CheckContext, trajectory: Trajectory | None, reference: Trajectory, described: str = ""
) -> Finding:
    tried = (
        ""
        if trajectory is None
        else (
            f"{described} took it from {trajectory.initial:.4g} to "
            f"{trajectory.losses[-1]:.4g} in {len(trajectory.losses) - 1} steps, and "
        )
    )
    evidence = _evidence(reference, "reference")
    if trajectory is not None:
        evidence.update(_evidence(trajectory, "optimizer"))
    seen = (
        f"The model cannot fit the one batch it was given: {tried}{reference.optimizer} "
        f"on a copy took it from {reference.initial:.4g} to {reference.losses[-1]:.4g} "
        f"in {len(reference.losses) - 1} steps."
    )
    cause = _blocked_flow(ctx)
    if cause is not None:
        reason, hint = cause
        evidence["cause"] = reason
        return _found(
            ctx,
            f"{seen} {reason}: little of the loss's signal reaches the weights, the likely reason.",
            hint,
            evidence,
        )
    return _found(
        ctx,
        f"{seen} The inputs, the targets and the loss are likely wired so that the "
        "batch cannot be learned.",
        "Check that the targets line up with the inputs, that the output layer has the "
        "right size and activation for the loss, and that nothing in the forward blocks "
        "the signal (a constant output, a detached branch).",
        evidence,
    )


def _blocked_flow(ctx: CheckContext) -> tuple[str, str] | None:
    """Gradients that vanish (TD215) or ReLUs that are dead (TD217) in the shared pass:
    why a correctly wired model cannot fit, with the fix, or ``None``."""
    faded = vanishing(ctx)
    if faded is not None:
        return (
            f"The gradients vanish on the way down ({faded.layers} layers; the first "
            f"gets {faded.ratio:.2g} of the last's, see TD215)",
            "Use ReLU/GELU instead of sigmoid/tanh between layers, add normalisation "
            "or residual connections (see TD215).",
        )
    sites = dead_relu_sites(ctx)
    if sites:
        dead = sum(site.units - int(site.alive.sum()) for site in sites)
        units = sum(site.units for site in sites)
        return (
            f"{dead} of {units} ReLU units at {len(sites)} site(s) never fire (see TD217)",
            "Revive the dead units: check the initialisation and biases, "
            "normalise the inputs, or use LeakyReLU/GELU (see TD217).",
        )
    return None


def _found(
    ctx: CheckContext,
    message: str,
    fix_hint: str,
    evidence: dict[str, Any],
    *,
    severity: Severity | None = None,
) -> Finding:
    return finding(
        "TD605",
        message,
        _location(ctx),
        Depth.CHECK,
        fix_hint=fix_hint,
        evidence=evidence,
        severity=severity,
    )
