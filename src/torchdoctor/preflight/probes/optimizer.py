"""The optimizer against the model: missing, frozen and repeated parameters (TD601-TD603)
and learning rates that are zero or far out of range for the optimizer (TD604).

Everything here reads the objects; nothing runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Confidence, Depth, Location, Severity
from torchdoctor.preflight.describe import (
    covering_module,
    format_number,
    peak_learning_rate,
    summarise_names,
)
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext


@dataclass(frozen=True, slots=True)
class LearningRateBand:
    """The learning rates an optimizer family works with; outside is "far out of range"."""

    family: str
    low: float
    high: float
    typical: str


_SGD = LearningRateBand("SGD", 1e-6, 10.0, "0.01 to 0.1 with momentum")
_ADAM = LearningRateBand("Adam", 1e-7, 0.05, "1e-5 to 1e-2, 1e-3 to start")
BANDS: dict[str, LearningRateBand] = {
    "SGD": _SGD,
    "ASGD": _SGD,
    "Adam": _ADAM,
    "AdamW": _ADAM,
    "NAdam": _ADAM,
    "RAdam": _ADAM,
    "Adamax": _ADAM,
    "SparseAdam": _ADAM,
    "RMSprop": LearningRateBand("RMSprop", 1e-7, 0.1, "1e-4 to 1e-2"),
    "Adagrad": LearningRateBand("Adagrad", 1e-6, 1.0, "1e-3 to 0.1"),
    "Adadelta": LearningRateBand("Adadelta", 1e-4, 10.0, "0.1 to 1"),
}


def named_trainables(ctx: CheckContext) -> list[tuple[str, Any]]:
    """Parameters that will train: the model's, and a loss module's as ``loss_fn.*``."""
    import torch

    named = [(n, p) for n, p in ctx.model.named_parameters() if p.requires_grad]
    if isinstance(ctx.loss_fn, torch.nn.Module):
        named += [(f"loss_fn.{n}", p) for n, p in ctx.loss_fn.named_parameters() if p.requires_grad]
    return named


def _all_names(ctx: CheckContext) -> dict[int, str]:
    import torch

    names = {id(p): n for n, p in ctx.model.named_parameters(remove_duplicate=False)}
    if isinstance(ctx.loss_fn, torch.nn.Module):
        names.update({id(p): f"loss_fn.{n}" for n, p in ctx.loss_fn.named_parameters()})
    return names


def _module_of(name: str) -> str:
    return name.rpartition(".")[0]


def _by_module(names: list[str]) -> dict[str, list[str]]:
    """Names grouped by their module, in first-seen order."""
    modules: dict[str, list[str]] = {}
    for name in names:
        modules.setdefault(_module_of(name), []).append(name)
    return modules


def _copies(missing: list[Any], foreign: list[Any]) -> bool:
    """Whether ``foreign`` tensors (the optimizer's, not the model's) have the shape and
    dtype of every parameter in ``missing``: the optimizer holds copies of them."""
    from collections import Counter

    wanted = Counter((tuple(p.shape), p.dtype) for p in missing)
    held = Counter((tuple(p.shape), p.dtype) for p in foreign)
    return bool(missing) and all(held[k] >= n for k, n in wanted.items())


def _foreign(ctx: CheckContext) -> list[Any]:
    """The optimizer's tensors that are no parameter of the model or the loss module."""
    own = {id(p) for _, p in named_trainables(ctx)} | set(_all_names(ctx))
    assert ctx.optimizer is not None
    return [p for group in ctx.optimizer.param_groups for p in group["params"] if id(p) not in own]


def holds_copies(ctx: CheckContext) -> bool:
    """Whether the optimizer holds copies of the trainable parameters it misses (TD620)."""
    if ctx.optimizer is None:
        return False
    held = {id(p) for group in ctx.optimizer.param_groups for p in group["params"]}
    missing = [p for _, p in named_trainables(ctx) if id(p) not in held]
    return _copies(missing, _foreign(ctx))


@probe("TD601", "TD620")
def parameters_missing_from_optimizer(ctx: CheckContext, out: Reporter) -> None:
    """Trainable parameters of the model (or loss module) in no parameter group; TD620
    when the optimizer holds copies of them instead (a deepcopy, a rebuilt layer)."""
    if ctx.optimizer is None:
        return
    held = {id(p) for group in ctx.optimizer.param_groups for p in group["params"]}
    trainable = named_trainables(ctx)
    missing = [n for n, p in trainable if id(p) not in held]
    if not missing:
        return
    foreign = _foreign(ctx)
    if holds_copies(ctx):
        where = covering_module(missing)
        out.emit(
            finding(
                "TD620",
                f"The optimizer holds {len(foreign)} tensor(s) that are not "
                f"{ctx.name('')}'s parameters but have the shapes of {len(missing)} of them "
                f"({summarise_names(missing, limit=4)}), which it does not hold: it was built for "
                "a copy of the model (a `deepcopy`, or layers replaced after it was made), so its "
                "steps never change this model.",
                Location(object=ctx.name(where)),
                Depth.CHECK,
                fix_hint="Build the optimizer from the model that is trained, after the model is "
                "complete (after any deepcopy or layer replacement).",
                evidence={"stale_tensors": len(foreign), "parameters": missing[:20]},
            )
        )
        return
    hint = (
        "Build the optimizer after the model is complete, from all the parameters that "
        "should train (`model.parameters()`), or freeze the ones meant to stay fixed "
        "with `requires_grad_(False)`."
    )
    if len(missing) == len(trainable):
        out.emit(
            finding(
                "TD601",
                f"The optimizer holds none of the {len(trainable)} trainable parameters "
                f"of {ctx.name('')} (it holds {len(held)} other tensors): it was built for "
                "another model or copy, so no training step will change this model.",
                Location(object=ctx.name("")),
                Depth.CHECK,
                fix_hint=hint,
                evidence={"missing": len(missing), "trainable": len(trainable)},
            )
        )
        return
    modules = _by_module(missing)
    where = covering_module(missing)
    out.emit(
        finding(
            "TD601",
            f"{len(missing)} trainable parameter(s) in {_count(len(modules), 'module')} "
            f"are in no optimizer parameter group: {summarise_names(missing, limit=4)}. They get "
            "gradients but never change.",
            Location(object=ctx.name(where)),
            Depth.CHECK,
            fix_hint=hint,
            evidence={
                "parameters": missing,
                "modules": list(modules),
                "missing": len(missing),
                "trainable": len(trainable),
            },
        )
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@probe("TD602")
def frozen_parameters_in_optimizer(ctx: CheckContext, out: Reporter) -> None:
    """Parameters with ``requires_grad=False`` inside the optimizer's groups."""
    if ctx.optimizer is None:
        return
    names = _all_names(ctx)
    frozen = [
        p for group in ctx.optimizer.param_groups for p in group["params"] if not p.requires_grad
    ]
    if not frozen:
        return
    moving = [p for p in frozen if p.grad is not None]
    labels = [names.get(id(p), f"<tensor {tuple(p.shape)}>") for p in frozen]
    common = covering_module(labels)
    message = (
        f"{len(frozen)} frozen parameter(s) (requires_grad=False) are in the optimizer: "
        f"{summarise_names(labels, limit=4)}."
    )
    if moving:
        message += (
            f" {len(moving)} of them still hold a `.grad`, so weight decay and "
            "momentum keep changing them."
        )
    out.emit(
        finding(
            "TD602",
            message,
            Location(object=ctx.name(common)),
            Depth.CHECK,
            severity=Severity.WARNING if moving else None,
            fix_hint="Pass only trainable parameters: "
            "`[p for p in model.parameters() if p.requires_grad]`.",
            evidence={"frozen": len(frozen), "with_grad": len(moving), "parameters": labels},
        )
    )


@probe("TD603")
def duplicate_parameters_in_optimizer(ctx: CheckContext, out: Reporter) -> None:
    """A parameter listed more than once, within a group or across groups."""
    if ctx.optimizer is None:
        return
    names = _all_names(ctx)
    seen: dict[int, list[int]] = {}
    labels: dict[int, str] = {}
    for index, group in enumerate(ctx.optimizer.param_groups):
        for param in group["params"]:
            seen.setdefault(id(param), []).append(index)
            labels[id(param)] = names.get(id(param), f"<tensor {tuple(param.shape)}>")
    repeated: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for key, groups in seen.items():
        if len(groups) > 1:
            label = labels[key]
            repeated.setdefault((_module_of(label), tuple(groups)), []).append(label)
    for (module, places), params in repeated.items():
        out.emit(
            finding(
                "TD603",
                f"{summarise_names(params)} appear {_places(places)} in the optimizer: "
                f"every step updates {'it' if len(params) == 1 else 'them'} {len(places)} times.",
                Location(object=ctx.name(module) if len(params) > 1 else params[0]),
                Depth.CHECK,
                fix_hint="List each parameter once; give parts of the model their own settings "
                "through separate, disjoint parameter groups.",
                evidence={"appearances": len(places), "groups": list(places), "parameters": params},
            )
        )


def _places(groups: tuple[int, ...]) -> str:
    if len(set(groups)) == 1:
        return f"{len(groups)} times in param_groups[{groups[0]}]"
    return f"{len(groups)} times, in " + ", ".join(f"param_groups[{g}]" for g in groups)


def band_for(optimizer: Any) -> LearningRateBand | None:
    """The band of a ``torch.optim`` optimizer; ``None`` for any other class."""
    import torch

    name = type(optimizer).__name__
    return BANDS.get(name) if getattr(torch.optim, name, None) is type(optimizer) else None


@probe("TD604")
def learning_rate_out_of_range(ctx: CheckContext, out: Reporter) -> None:
    """Learning rates that are zero, negative, not finite or far out of the family's band."""
    if ctx.optimizer is None:
        return
    groups = [
        (index, group, peak_learning_rate(group))
        for index, group in enumerate(ctx.optimizer.param_groups)
        if any(p.requires_grad for p in group["params"])
    ]
    training = [peak for _, _, peak in groups if peak is not None and peak > 0]
    band = band_for(ctx.optimizer)
    for index, group, peak in groups:
        if peak is None:
            continue
        problem = _rate_problem(peak, band, trains_elsewhere=bool(training))
        if problem is None:
            continue
        text, hint, severity, confidence = problem
        out.emit(
            finding(
                "TD604",
                f"param_groups[{index}] of {type(ctx.optimizer).__name__} has "
                f"{_rate_text(group, peak)}: {text}.",
                Location(object=f"optimizer.param_groups[{index}]"),
                Depth.CHECK,
                fix_hint=hint,
                severity=severity,
                confidence=confidence,
                evidence={
                    "lr": peak,
                    "group": index,
                    **({"band": [band.low, band.high]} if band else {}),
                },
            )
        )


def _rate_text(group: dict[str, Any], peak: float) -> str:
    current = group.get("lr")
    text = f"lr={format_number(current)}"
    if current is not None and format_number(current) != format_number(peak):
        text += f" (its schedule peaks at {format_number(peak)})"
    return text


def _rate_problem(
    peak: float, band: LearningRateBand | None, *, trains_elsewhere: bool
) -> tuple[str, str, Severity | None, Confidence] | None:
    """What is wrong with a group's peak rate, its fix, severity and confidence, or None."""
    if math.isnan(peak) or peak < 0:
        return (
            "not a usable learning rate",
            "Set a positive, finite learning rate.",
            None,
            Confidence.HIGH,
        )
    if peak == 0:
        if trains_elsewhere:
            return (
                "its parameters never change while the other groups train",
                "Freeze them with `requires_grad_(False)` (which also skips their "
                "gradients) if that is the intent; otherwise give the group a rate.",
                Severity.INFO,
                Confidence.MEDIUM,
            )
        return (
            "no parameter will ever change",
            "Set a learning rate above zero "
            "(a warm-up scheduler created before the check is recognised).",
            None,
            Confidence.HIGH,
        )
    if band is None or band.low <= peak <= band.high:
        return None
    side = "above" if peak > band.high else "below"
    return (
        f"far {side} what {band.family} trains with "
        f"(reported outside {format_number(band.low)} to {format_number(band.high)}; "
        f"typical: {band.typical})",
        f"Use a learning rate in {band.family}'s usual range ({band.typical}) and tune from there.",
        None,
        Confidence.HIGH,
    )
