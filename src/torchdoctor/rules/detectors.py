"""Registration of detectors: which code each detects, at which depth.

Every depth registers the same way: a detector (a lint rule class, a probe function, a
runtime detector class, a ckpt or env check) is decorated with ``@detector(code, ...,
depth=...)`` in a module that its depth's package imports by name, in an order the
package states (:data:`DETECTOR_MODULES` names those packages; nothing is discovered by
scanning folders). Each depth keeps its own dispatch structures (AST handlers for
``lint``, probe functions for ``check``, hook-driven classes for ``run``) built from this
registry, so the test suite can prove that every catalogued depth of every rule has a
detector and that no detector reports an unknown code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from torchdoctor.findings import Depth
from torchdoctor.rules.registry import get_rule

__all__ = ["DetectorInfo", "detector", "load_detector_modules", "registered_detectors"]

T = TypeVar("T")

# Importing these, in this order, registers every detector of the depth. Each package
# imports its topic modules by name in its ``__init__``, where the order they run in is
# stated (check: probe order; run: hook and ``on_finish`` order, root causes first).
# Names, not imports: this floor must not import the depths above it.
DETECTOR_MODULES: dict[Depth, tuple[str, ...]] = {
    Depth.LINT: ("torchdoctor.static.rules",),
    Depth.CHECK: ("torchdoctor.preflight.probes",),
    Depth.RUN: ("torchdoctor.runtime.detectors", "torchdoctor.distributed.detectors"),
    Depth.CKPT: ("torchdoctor.ckpt",),
    Depth.ENV: ("torchdoctor.env",),
}


@dataclass(frozen=True, slots=True)
class DetectorInfo:
    """One registered detector: its codes, depth and the object that implements it."""

    codes: tuple[str, ...]
    depth: Depth
    target: object

    @property
    def name(self) -> str:
        """The detector's qualified name, for error messages."""
        return getattr(self.target, "__qualname__", repr(self.target))


_REGISTERED: list[DetectorInfo] = []


def detector(*codes: str, depth: Depth) -> Callable[[T], T]:
    """Class or function decorator: record that ``target`` reports ``codes`` at ``depth``.

    Raises:
        UnknownRuleError: a code is not in the catalogue (raised at import time, so a typo
            cannot ship).
    """
    for code in codes:
        get_rule(code)

    def register(target: T) -> T:
        _REGISTERED.append(DetectorInfo(tuple(codes), depth, target))
        return target

    return register


def registered_detectors(depth: Depth | None = None) -> list[DetectorInfo]:
    """Detectors registered so far (all depths, or one)."""
    return [info for info in _REGISTERED if depth is None or info.depth is depth]


def load_detector_modules(depths: tuple[Depth, ...] = tuple(Depth)) -> None:
    """Import the modules that register the detectors of ``depths``.

    The ``check``, ``run`` and ``ckpt`` depths need torch; this raises ``ImportError``
    without it, which is why callers choose their depths.
    """
    for depth in depths:
        for module in DETECTOR_MODULES[depth]:
            importlib.import_module(module)
