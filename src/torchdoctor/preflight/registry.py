"""Registration of probes: the ``check`` depth's detectors.

A probe is a function ``probe(ctx: CheckContext, out: Reporter) -> None`` that reports
through ``out`` (:class:`torchdoctor._kernel.Reporter`, as every detector does), decorated
with :func:`probe`, which records it here (in import order, the order probes run) and in the
catalogue's detector registry (:func:`torchdoctor.rules.detectors.detector`), so the test
suite can join probes to rules. Probe modules are imported by name in
:mod:`torchdoctor.preflight.probes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["ProbeFunction", "ProbeInfo", "probe", "registered_probes"]

ProbeFunction = Callable[["CheckContext", Reporter], None]


@dataclass(frozen=True, slots=True)
class ProbeInfo:
    """One registered probe: the rule codes it may report and the function."""

    codes: tuple[str, ...]
    function: ProbeFunction

    @property
    def name(self) -> str:
        """``module.function``, used in internal-error findings."""
        module = self.function.__module__.rsplit(".", 1)[-1]
        return f"{module}.{self.function.__name__}"


_PROBES: list[ProbeInfo] = []


def probe(*codes: str) -> Callable[[ProbeFunction], ProbeFunction]:
    """Decorator: register a probe that reports ``codes`` at the ``check`` depth.

    Raises:
        UnknownRuleError: a code is not catalogued (at import time).
    """
    register_detector = detector(*codes, depth=Depth.CHECK)

    def register(function: ProbeFunction) -> ProbeFunction:
        register_detector(function)
        _PROBES.append(ProbeInfo(tuple(codes), function))
        return function

    return register


def registered_probes() -> list[ProbeInfo]:
    """Every probe registered so far, in the order they run."""
    return list(_PROBES)
