"""What the framework callbacks share: one watched fit, its report, and what to do with it.

A :class:`FitSession` starts a :func:`torchdoctor.watch` when the framework's training
begins and stops it when training ends (or fails), then prints the report on the main
process, hands finding counts to the framework's logger, and raises
:class:`FindingsError` when asked to fail on findings. The framework's own work (its
``zero_grad``, gradient accumulation, AMP scaling, validation loops) happens through the
real ``torch`` calls the monitor already watches once each, so nothing is counted twice.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from torchdoctor.errors import TorchDoctorError
from torchdoctor.findings import Report, Severity

__all__ = ["FindingsError", "FitSession", "finding_counts"]


class FindingsError(TorchDoctorError):
    """Training finished with findings at or above the callback's ``fail_on``.

    Attributes:
        report: the report of the watched training.
    """

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def finding_counts(report: Report, prefix: str = "torchdoctor/") -> dict[str, float]:
    """``{"torchdoctor/errors": 1.0, "torchdoctor/warnings": 0.0, ...}`` for a logger."""
    counts = report.counts()
    return {
        f"{prefix}errors": float(counts["error"]),
        f"{prefix}warnings": float(counts["warning"]),
        f"{prefix}info": float(counts["info"]),
    }


class FitSession:
    """One watched training run of a framework's trainer (see the module docstring)."""

    def __init__(
        self,
        *,
        framework: str,
        fail_on: Severity | str | None,
        select: Iterable[str] | None,
        ignore: Iterable[str] | None,
        sample_every: int | None,
        print_report: bool,
        stream: TextIO | None,
    ) -> None:
        self.framework = framework
        self.fail_on = Severity(fail_on) if isinstance(fail_on, str) else fail_on
        self.select = list(select) if select is not None else None
        self.ignore = list(ignore) if ignore is not None else None
        self.sample_every = sample_every
        self.print_report = print_report
        self.stream = stream
        self.report: Report | None = None
        self._watch: Any = None

    @property
    def running(self) -> bool:
        """Whether a watch is attached."""
        return self._watch is not None

    def start(self, model: Any, user_class: type | None = None) -> None:
        """Attach a watch over ``model`` (``None``: found from the first steps).

        ``user_class`` (the user's module class) places the user's code: findings point
        at lines in its file and next to it, not inside the framework.
        """
        from torchdoctor.runtime.watch import watch

        if self._watch is not None:
            self.stop()
        self.report = None
        self._watch = watch(
            model,
            None,
            select=self.select,
            ignore=self.ignore,
            sample_every=self.sample_every,
            status_line=False,
            _caller=_source_file(user_class or type(model)),
        )
        self._watch.start()

    def stop(self, exc: BaseException | None = None) -> Report | None:
        """Detach the watch and keep its report (idempotent)."""
        if self._watch is None:
            return self.report
        watcher, self._watch = self._watch, None
        self.report = watcher.stop(exc)
        return self.report

    def conclude(self, *, main_process: bool) -> None:
        """Print the report (on the main process) and raise when findings fail the fit.

        Raises:
            FindingsError: a finding at or above ``fail_on``.
        """
        report = self.report
        if report is None:
            return
        if main_process and self.print_report:
            from torchdoctor.report import RenderOptions, render

            stream = self.stream or sys.stdout
            stream.write(
                render(
                    report,
                    "text",
                    RenderOptions(width=100, title=f"torchdoctor: {self.framework} training"),
                )
            )
            stream.flush()
        if self.fail_on is not None and report.exit_code(self.fail_on) != 0:
            codes = ", ".join(
                sorted({f.code for f in report.findings if f.severity >= self.fail_on})
            )
            raise FindingsError(
                f"torchdoctor found problems at or above {self.fail_on.value} in this "
                f"{self.framework} training: {codes}; see the report above",
                report,
            )


_FRAMEWORKS = (
    "torchdoctor",
    "torch",
    "lightning",
    "pytorch_lightning",
    "transformers",
    "accelerate",
    "lightning_fabric",
    "contextlib",
    "functools",
)


def _source_file(cls: type) -> str | None:
    """Where the user's code is: the file that defines ``cls`` (the user's module), or,
    for a framework's own class (a ``transformers`` model), the innermost caller outside
    the frameworks (the script that called ``train()``)."""
    if cls.__module__.split(".")[0] not in _FRAMEWORKS:
        try:
            return inspect.getsourcefile(cls) or None
        except (TypeError, OSError):
            pass
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.split(".")[0] not in _FRAMEWORKS:
            return frame.f_code.co_filename
        frame = frame.f_back  # type: ignore[assignment]
    return None
