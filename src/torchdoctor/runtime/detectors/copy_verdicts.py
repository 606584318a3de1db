"""The verdicts on copies of the trained model (TD623, TD624): what
:mod:`torchdoctor.runtime.detectors.copies` measured, judged and told.

The thresholds and why they hold are in that module's docstring.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import CallSite

__all__ = [
    "DRIFT_BOUND",
    "DRIFT_RISES",
    "MIN_CHECKS",
    "MIN_SPAN",
    "MIN_WRITES",
    "MOVED",
    "Check",
    "Names",
    "Pair",
    "drifting",
    "names_of",
    "never_changed",
    "trained",
]

MIN_SPAN = 50  # steps between the first and the last check before a verdict
MIN_WRITES = 2  # check intervals in which a copy that never changed was written
MIN_CHECKS = 3  # checks after the first one
DRIFT_RISES = 4  # consecutive checks at which a drifting copy's distance grew
DRIFT_BOUND = 3.0  # x the original's largest norm (an average of its states stays within 2x)
MOVED = 1e-6  # relative movement of the original that counts as training
_ASSIGNED = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]+)?=(?!=)")
_COPIED = re.compile(r"deepcopy\(\s*([A-Za-z_][\w.]*)\s*[,)]")


@dataclass(slots=True)
class Check:
    step: int
    writes: int  # the copy's write count
    changed: bool = False  # its bits differ from the first check's
    distance: float = 0.0  # between the copy's and the original's values read
    norm: float = 0.0  # of the original's values read
    moved: float = 0.0  # the original's movement since the first check, relative


@dataclass(slots=True)
class Pair:
    """A copy and the trained module it was made from."""

    copy: weakref.ref[Any]
    original: weakref.ref[Any]
    site: CallSite | None
    made_by_deepcopy: bool
    known: bool  # made from the original; else decided by the first check (equal bits)
    rejected: bool = False
    optimizer: Any = None  # the OptimizerInfo holding both, for TD624
    base: tuple[Any, Any] | None = None  # the copy's bits, the original's values
    checks: list[Check] = field(default_factory=list)
    in_step: int = 0  # sampled steps at which the optimizer wrote the copy
    between: int = 0  # sampled intervals in which something else wrote it
    per_step: int = 0  # most writes one optimizer step made
    begin: int | None = None
    last_end: tuple[int, int] | None = None  # (step, write count) after a sampled step


@dataclass(frozen=True, slots=True)
class Names:
    """How messages call a copy and its original, how it was made, and where."""

    copy: str
    original: str
    how: str
    where: Location


def names_of(pair: Pair, module_name: Callable[[Any], str]) -> Names:
    """Names from the line that made the copy (``ema = copy.deepcopy(model)``), else the
    modules' paths or class names."""
    line = (pair.site.location().snippet or "") if pair.site is not None else ""
    assigned, copied = _ASSIGNED.match(line), _COPIED.search(line)
    name = assigned.group(1) if assigned else module_name(pair.copy())
    original = copied.group(1) if copied else module_name(pair.original())
    how = (
        f"made by `copy.deepcopy` at {pair.site}"
        if pair.made_by_deepcopy and pair.site is not None
        else "identical to it when first checked"
    )
    where = pair.site.location(object=name) if pair.site is not None else Location(object=name)
    return Names(name, original, how, where)


def never_changed(pair: Pair, names: Names) -> Finding | None:
    """TD623: the same bits at every check, though written in place, while the original
    moved."""
    checks = pair.checks
    if len(checks) < MIN_CHECKS + 1 or any(c.changed for c in checks[1:]):
        return None
    first, last = checks[0], checks[-1]
    written = sum(1 for a, b in zip(checks, checks[1:], strict=False) if b.writes > a.writes)
    if last.step - first.step < MIN_SPAN or written < MIN_WRITES or last.moved <= MOVED:
        return None
    name, original = names.copy, names.original
    return finding(
        "TD623",
        f"`{name}` (a copy of `{original}`, {names.how}) never changed over "
        f"{last.step - first.step} steps: its values are the same bits at all {len(checks)} "
        f"checks, though its parameters were written in place in {written} of the intervals "
        f"between them (an update or a sync runs on it), while `{original}`'s weights moved "
        f"{last.moved:.2g} relative. The update writes the copy's own values back (a decay of "
        "1, a sync from the copy itself or from a saved state, or a step too small for the "
        f"copy's dtype), so whatever uses `{name}` sees `{original}` as it was at step "
        f"{first.step}",
        names.where,
        Depth.RUN,
        fix_hint=f"Update `{name}` from the model being trained: "
        "`ema_p.lerp_(p, 1 - decay)` with a decay below 1, or "
        f"`{name}.load_state_dict({original}.state_dict())`.",
        evidence={
            "copy": name,
            "original": original,
            "steps": last.step - first.step,
            "checks": len(checks),
            "written_intervals": written,
            "original_moved": last.moved,
        },
    )


def drifting(pair: Pair, names: Names) -> Finding | None:
    """TD623: farther from the original than any average of its states, and farther at
    each of the last checks."""
    checks = pair.checks[1:]  # the first check has no distance read
    if len(checks) < DRIFT_RISES + 1 or checks[-1].step - pair.checks[0].step < MIN_SPAN:
        return None
    recent = [c.distance for c in checks[-DRIFT_RISES - 1 :]]
    largest = max(c.norm for c in checks)
    last = checks[-1]
    rising = all(b > a for a, b in zip(recent, recent[1:], strict=False))
    if not rising or largest <= 0 or last.distance <= DRIFT_BOUND * largest:
        return None
    original = names.original
    return finding(
        "TD623",
        f"`{names.copy}` (a copy of `{original}`, {names.how}) drifts away from it: their "
        f"distance grew at each of the last {DRIFT_RISES} checks, from {recent[0]:.3g} to "
        f"{last.distance:.3g} at step {last.step}, {last.distance / largest:.1f} times the "
        f"largest norm `{original}` had (an average of `{original}`'s states stays within 2 "
        "times). The update adds to the copy instead of blending it with the model",
        names.where,
        Depth.RUN,
        fix_hint="Blend with weights that sum to 1: "
        "`ema_p.mul_(decay).add_(p, alpha=1 - decay)`, or `ema_p.lerp_(p, 1 - decay)`.",
        evidence={
            "copy": names.copy,
            "original": original,
            "distances": recent,
            "largest_original_norm": largest,
            "step": last.step,
        },
    )


def trained(pair: Pair, names: Names) -> Finding | None:
    """TD624: the optimizer holding the original changes the copy, and the code writes it
    between steps too."""
    if pair.optimizer is None or pair.in_step < 2 or pair.between < 2:
        return None
    name, original, label = names.copy, names.original, pair.optimizer.label
    return finding(
        "TD624",
        f"`{name}` (a copy of `{original}`, {names.how}) is in {label}'s param_groups with "
        f"`{original}`, and {label} changed it at {pair.in_step} sampled steps, while the code "
        f"also writes it between steps ({pair.between} sampled intervals: a sync or an EMA "
        f"update). The copy meant to follow `{original}` is trained as well: it gets "
        "gradients and updates, so it is no longer the lagged, fixed target it should be",
        names.where,
        Depth.RUN,
        fix_hint=f"Build the optimizer from `{original}`'s parameters only (not from a module "
        f"that holds both networks), compute `{name}`'s outputs under `torch.no_grad()`, and "
        f"freeze it with `{name}.requires_grad_(False)`.",
        evidence={
            "copy": name,
            "original": original,
            "optimizer": label,
            "stepped": pair.in_step,
            "written_between_steps": pair.between,
        },
    )
