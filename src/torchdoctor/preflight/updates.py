"""The first update's size relative to the weights, per parameter group (TD606).

The learning probe (:mod:`torchdoctor.preflight.probes.learning`) measures ‖Δw‖/‖w‖ of
each group on the first step of its overfit run; this module judges the ratios against
the band and words the findings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.preflight.describe import format_number, summarise_names
from torchdoctor.preflight.overfit import GroupUpdate
from torchdoctor.preflight.training import is_finite
from torchdoctor.rules.registry import finding

__all__ = ["RATIO_HIGH", "RATIO_LOW", "update_findings"]

# The band of the first update's ||dw|| / ||w|| per group (see the TD606 doc for the
# measurements behind it).
RATIO_LOW, RATIO_HIGH = 1e-7, 1.0


def update_findings(updates: tuple[GroupUpdate, ...], described: str) -> Iterator[Finding]:
    """TD606 for every group whose first update is outside [RATIO_LOW, RATIO_HIGH]."""
    for update in updates:
        if not is_finite(update.ratio) or RATIO_LOW <= update.ratio <= RATIO_HIGH:
            continue  # NaN gradients have rules of their own
        if update.ratio == 0.0 and float(update.lr) == 0.0:
            continue  # a zero learning rate is TD604's
        yield _update_finding(update, described)


def _update_finding(update: GroupUpdate, described: str) -> Finding:
    rate = format_number(update.lr)
    if update.ratio > RATIO_HIGH:
        effect = "above 1 every step overwrites the weights."
        hint = (
            f"Lower this group's learning rate (lr={rate}) about "
            f"{update.ratio / 1e-2:.0f}x, or the loss scale (a `reduction='sum'` loss "
            "grows with the batch)."
        )
    elif update.ratio == 0.0:
        effect = "the update is below float32 resolution, so the weights do not change at all."
        hint = (
            f"Raise this group's learning rate (lr={rate}), or check that the loss is "
            "not scaled down."
        )
    else:
        effect = (
            f"below {RATIO_LOW:g} the weights barely move: ten million steps change "
            "them by their own size."
        )
        hint = (
            f"Raise this group's learning rate (lr={rate}) about "
            f"{1e-3 / update.ratio:.0f}x, or check that the loss is not scaled down."
        )
    return finding(
        "TD606",
        f"One {described} step changes the weights of param_groups[{update.index}] "
        f"({summarise_names(update.names)}) by {update.ratio:.3g} of their norm "
        f"(‖Δw‖/‖w‖); {effect}",
        Location(object=f"optimizer.param_groups[{update.index}]"),
        Depth.CHECK,
        fix_hint=hint,
        evidence={
            "update_ratio": update.ratio,
            "lr": _plain(update.lr),
            "group": update.index,
            "parameters": len(update.names),
            "band": [RATIO_LOW, RATIO_HIGH],
        },
    )


def _plain(value: Any) -> Any:
    return float(value) if hasattr(value, "item") else value
