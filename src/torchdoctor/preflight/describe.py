"""Short, readable names for what the probes report on: optimizers, sets of parameters."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = [
    "covering_module",
    "describe_optimizer",
    "format_number",
    "peak_learning_rate",
    "summarise_names",
]


def format_number(value: Any) -> str:
    """A learning rate or a ratio as people write it: ``0.001``, ``1e-05``, ``50``."""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def describe_optimizer(optimizer: Any) -> str:
    """``SGD(lr=0.01)``; ``AdamW(lr=0.001/0.0001)`` for groups with different rates."""
    rates: list[str] = []
    for group in optimizer.param_groups:
        rate = format_number(group.get("lr"))
        if rate not in rates:
            rates.append(rate)
    return f"{type(optimizer).__name__}(lr={'/'.join(rates)})"


def summarise_names(names: Iterable[str], limit: int = 3) -> str:
    """Parameter names grouped by module: ``head (weight, bias)``, or a count past ``limit``.

    Example: ``["fc.weight", "fc.bias", "out.weight"]`` -> ``"fc (weight, bias), out (weight)"``.
    """
    modules: dict[str, list[str]] = {}
    for name in names:
        module, _, leaf = name.rpartition(".")
        modules.setdefault(module or "<root>", []).append(leaf)
    shown = [f"{module} ({', '.join(leaves)})" for module, leaves in list(modules.items())[:limit]]
    total = sum(len(leaves) for leaves in modules.values())
    if len(modules) > limit:
        shown.append(f"and {len(modules) - limit} more modules; {total} parameters in all")
    return ", ".join(shown)


def peak_learning_rate(group: dict[str, Any]) -> float | None:
    """The largest of ``lr``, a scheduler's ``initial_lr`` and ``max_lr`` (warm-ups)."""
    rates = []
    for key in ("lr", "initial_lr", "max_lr"):
        try:
            rates.append(float(group[key]))
        except (KeyError, TypeError, ValueError):
            continue
    finite = [rate for rate in rates if math.isfinite(rate)]
    if len(finite) < len(rates):
        return math.nan
    return max(finite) if finite else None


def covering_module(paths: Iterable[str], *, parameters: bool = True) -> str:
    """The innermost module path that contains every one of ``paths`` ("" for the root).

    With ``parameters``, the paths are parameter names (``features.0.weight``) and their
    last part is dropped; otherwise they are module paths. ``["features.0.weight",
    "features.4.bias"]`` -> ``"features"``: one place for a finding about all of them.
    """
    parts = [
        path.split(".")[:-1] if parameters else path.split(".") if path else [] for path in paths
    ]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)
