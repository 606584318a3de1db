"""Probe 4, gradient flow: which parameters get a gradient, and what it looks like."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.preflight.context import CheckContext
from torchdoctor.preflight.describe import covering_module
from torchdoctor.preflight.flow import dead_relu_sites, vanishing
from torchdoctor.preflight.probes.loss import single_logit_scores
from torchdoctor.preflight.registry import probe
from torchdoctor.preflight.training import copy_for_training, train_step
from torchdoctor.rules.registry import finding

__all__ = ["dead_relu_units", "missing_or_broken_gradients", "vanishing_gradients"]

_LISTED = 5


def _owner(name: str) -> str:
    return name.rpartition(".")[0]


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def _shape(ctx: CheckContext, name: str) -> list[int]:
    return list(ctx.model.get_parameter(name).shape)


def _no_gradient(ctx: CheckContext, names: list[str]) -> Iterator[Finding]:
    called = ctx.train_pass.trace.called
    never_ran = [n for n in names if _owner(n) not in called]
    detached = [n for n in names if _owner(n) in called]
    for group, why in (
        (never_ran, "their modules never run in the forward"),
        (
            detached,
            "their modules run, but their output does not reach the "
            "loss (`.detach()`, `torch.no_grad()`, `.item()` or a "
            "NumPy round trip)",
        ),
    ):
        if not group:
            continue
        yield finding(
            "TD208",
            f"{len(group)} parameters require grad but receive no gradient: "
            f"{_names(group)} (shape {_shape(ctx, group[0])}): {why}. They never "
            "train, and an optimizer with weight decay still shrinks them.",
            Location(object=ctx.name(covering_module(group))),
            Depth.CHECK,
            fix_hint="Use the module in `forward` without detaching it, or remove it, or "
            "freeze it on purpose with `requires_grad_(False)`.",
            evidence={"parameters": group[:20], "count": len(group)},
        )


def _zero_gradients(ctx: CheckContext, grads: dict[str, Any]) -> list[str]:
    """Parameters whose whole gradient is exactly zero.

    A bias or scale whose siblings in the same module do get a gradient is left out: its
    zero is structural (a bias before BatchNorm, a bias that cancels between the two
    branches of a siamese network) and harmless.
    """
    zero = {n for n, g in grads.items() if g is not None and not bool(g.any())}
    flowing = {_owner(n) for n, g in grads.items() if g is not None and n not in zero}
    found = [
        n
        for n in grads
        if n in zero and not (ctx.model.get_parameter(n).dim() < 2 and _owner(n) in flowing)
    ]
    if not found:
        return found
    revived = _revived_without_zero_init(ctx)
    return [n for n in found if n not in revived]


def _revived_without_zero_init(ctx: CheckContext) -> set[str]:
    """Parameters whose gradient is non-zero once all-zero parameters are perturbed.

    Zero initialisation on purpose (LoRA's B matrix, `zero_init_residual` BatchNorm
    weights, ReZero gates) blocks the gradient of what lies behind it for the first step
    only; that is not this bug. Run on a copy of the model.
    """
    import torch

    zeros = [p for p in ctx.model.parameters() if p.is_floating_point() and not bool(p.any())]
    if not zeros:
        return set()
    try:
        training = copy_for_training(ctx, with_optimizer=False)
        model = training.model
        with torch.no_grad():
            for param in model.parameters():
                if param.is_floating_point() and not bool(param.any()):
                    param.normal_(0.0, 1e-3)
        train_step(training, ctx.batch, ctx.seed)
    except Exception:  # noqa: BLE001 - without the experiment, report what was seen
        return set()
    return {n for n, p in model.named_parameters() if p.grad is not None and bool(p.grad.any())}


@probe("TD208", "TD211", "TD212")
def missing_or_broken_gradients(ctx: CheckContext, out: Reporter) -> None:
    """TD208/211/212: no gradient, an all-zero gradient, a non-finite gradient."""
    import torch

    loss = ctx.train_pass.require_loss()
    if not bool(torch.isfinite(loss).all()):
        return  # TD213 reports the loss; its gradients say nothing more
    if not ctx.batch_is_finite or ctx.train_pass.backward_error is not None:
        return  # TD401 reports the data; TD605 why nothing can get a gradient
    grads = ctx.train_pass.gradients
    if any(g is not None for g in grads.values()):  # else the loss is cut off: TD605's
        for item in _no_gradient(ctx, [n for n, g in grads.items() if g is None]):
            out.emit(item)
    zero = _zero_gradients(ctx, grads)
    if zero and single_logit_scores(ctx) is None:  # else TD308 names the cause
        out.emit(
            finding(
                "TD211",
                f"{len(zero)} of {len(grads)} parameters get a gradient of exactly zero: "
                f"{_names(zero)}. Something between them and the loss has zero "
                "derivative (round, sign, argmax, a clamp that always clips, a mask of "
                "zeros), so they never change.",
                Location(object=ctx.name(covering_module(zero))),
                Depth.CHECK,
                fix_hint="Replace the non-differentiable op on their path (a straight-through "
                "estimator, a soft version) or remove the mask that zeroes it.",
                evidence={"parameters": zero[:20], "count": len(zero)},
            )
        )
    broken = [n for n, g in grads.items() if g is not None and not bool(torch.isfinite(g).all())]
    if broken:
        out.emit(
            finding(
                "TD212",
                f"The loss is finite but {len(broken)} parameters get NaN/Inf gradients: "
                f"{_names(broken)}. One optimizer step makes those weights NaN. Typical "
                "causes: sqrt or norm of 0, log of 0, division by a value that is 0.",
                Location(object=broken[0]),
                Depth.CHECK,
                fix_hint="Add an epsilon inside sqrt/log/division on their path "
                "(`torch.sqrt(x + 1e-12)`), or clamp the input.",
                evidence={"parameters": broken[:20], "count": len(broken)},
            )
        )


@probe("TD215")
def vanishing_gradients(ctx: CheckContext, out: Reporter) -> None:
    """TD215: the earliest layer's gradient is orders of magnitude below the latest's."""
    ctx.train_pass.require_loss()
    found = vanishing(ctx)
    if found is None:
        return
    out.emit(
        finding(
            "TD215",
            f"Gradients vanish through the {found.layers} layers: the first layer "
            f"`{found.first}` gets a gradient RMS of {found.first_rms:.3g}, the last "
            f"`{found.last}` {found.last_rms:.3g} (ratio {found.ratio:.2g}). The early "
            "layers barely train.",
            Location(object=found.first),
            Depth.CHECK,
            fix_hint="Use ReLU/GELU instead of sigmoid/tanh between layers, add normalisation "
            "(BatchNorm/LayerNorm) or residual connections, and a suitable init "
            "(`nn.init.kaiming_normal_`).",
            evidence={
                "first": found.first,
                "first_rms": found.first_rms,
                "last": found.last,
                "last_rms": found.last_rms,
                "ratio": found.ratio,
                "layers": found.layers,
            },
        )
    )


@probe("TD217")
def dead_relu_units(ctx: CheckContext, out: Reporter) -> None:
    """TD217: ReLU sites where most units output zero for the whole batch, reported once
    for all of them (one cause, such as the inputs' scale or the init, usually kills
    units at every site it reaches)."""
    sites = dead_relu_sites(ctx)
    if not sites:
        return
    counts = [
        (ctx.name(site.module), site.units - int(site.alive.sum()), site.units) for site in sites
    ]
    dead, units = sum(d for _, d, _ in counts), sum(u for _, _, u in counts)
    listed = ", ".join(f"`{where}` {d} of {u} ({d / u:.0%})" for where, d, u in counts[:_LISTED])
    more = f" and {len(counts) - _LISTED} more sites" if len(counts) > _LISTED else ""
    where = ctx.name(covering_module([site.module for site in sites], parameters=False))
    if len(sites) == 1:
        what = (
            f"At `{counts[0][0]}`, {dead} of {units} ReLU units ({dead / units:.0%}) "
            f"output zero for every one of {sites[0].observations} values in the batch"
        )
    else:
        what = (
            f"At {len(sites)} ReLU sites, {dead} of {units} units output zero for every "
            f"value in the batch ({listed}{more})"
        )
    out.emit(
        finding(
            "TD217",
            f"{what}: they pass no gradient, so they can never recover.",
            Location(object=where),
            Depth.CHECK,
            fix_hint="Check the initialisation of the layer before it (no large negative "
            "biases; Kaiming init), normalise the inputs, lower the learning rate, "
            "or use LeakyReLU/GELU.",
            evidence={
                "dead": dead,
                "units": units,
                "observations": min(site.observations for site in sites),
                "sites": {where: [d, u] for where, d, u in counts},
            },
        )
    )
