"""Runtime detector: the exception that ended the run, explained.

Zero cost while training: the monitor calls :meth:`on_exception` once, with the exception
that escaped the user's code (an exception the script caught and handled never gets here,
nor do ``KeyboardInterrupt``, ``SystemExit`` or ``--max-steps``). The explanation itself is
in :mod:`torchdoctor.runtime.exceptions`.
"""

from __future__ import annotations

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.runtime.detectors.base import RuntimeDetector
from torchdoctor.runtime.exceptions import explain_exception

__all__ = ["ExceptionExplainer"]


@detector(
    "TD004",
    "TD101",
    "TD104",
    "TD107",
    "TD108",
    "TD208",
    "TD209",
    "TD219",
    "TD220",
    "TD306",
    "TD403",
    "TD413",
    "TD707",
    "TD709",
    depth=Depth.RUN,
)
class ExceptionExplainer(RuntimeDetector):
    """Turns the run's fatal exception into one finding: meaning, place, module, fixes."""

    def on_exception(self, exc: BaseException) -> None:
        """Explain ``exc`` against the models the monitor knows."""
        monitor = self.monitor
        found = explain_exception(
            exc,
            models=[info.inner for info in monitor.models],
            roots=[str(root) for root in monitor.user_roots],
            step=monitor.global_step,
            optimizers=[info.optimizer for info in monitor.optimizers],
        )
        if found is not None:
            self.emit(found)
