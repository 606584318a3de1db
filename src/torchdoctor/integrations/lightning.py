"""torchdoctor's runtime detectors inside a PyTorch Lightning ``Trainer``.

::

    from torchdoctor.integrations.lightning import DoctorCallback

    doctor = DoctorCallback(fail_on="error")
    trainer = Trainer(callbacks=[doctor])
    trainer.fit(model, datamodule)
    doctor.report                      # the Report of the fit

The watch starts at ``setup("fit")`` (before ``configure_optimizers``, so a finding about
the optimizer points at the line that built it) and ends with the fit, also when it fails.
Lightning's own ``zero_grad``, gradient accumulation, AMP scaling and validation loops are
ordinary ``torch`` calls that the monitor sees once each, so a correct Lightning training
gives no finding. At the end the report is printed on global rank zero, the finding counts
go to every logger of the trainer (``torchdoctor/errors``, ``torchdoctor/warnings``,
``torchdoctor/info``), and with ``fail_on`` the fit raises :class:`FindingsError`.

Works with the ``lightning`` package (``lightning.pytorch``) or, when it is not installed,
the older ``pytorch_lightning``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

from torchdoctor.findings import Report, Severity
from torchdoctor.integrations._session import FindingsError, FitSession, finding_counts

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment,unused-ignore]

__all__ = ["DoctorCallback", "FindingsError"]


class DoctorCallback(Callback):  # type: ignore[misc,unused-ignore]
    """Watch a Lightning fit with torchdoctor's runtime detectors.

    Args:
        fail_on: ``"error"``, ``"warning"`` or ``"info"``: raise :class:`FindingsError`
            at the end of the fit when a finding is this bad or worse; ``None`` (default)
            never fails.
        select: rule codes or prefixes to report; default all.
        ignore: rule codes or prefixes not to report.
        sample_every: full statistics every N steps (default: dense at first, then cheap).
        print_report: print the text report at the end on global rank zero.
        stream: where to print it (default standard output).

    Attributes:
        report: the :class:`~torchdoctor.findings.Report` of the last fit, or ``None``.
    """

    def __init__(
        self,
        *,
        fail_on: Severity | str | None = None,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        sample_every: int | None = None,
        print_report: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        super().__init__()
        self._session = FitSession(
            framework="Lightning",
            fail_on=fail_on,
            select=select,
            ignore=ignore,
            sample_every=sample_every,
            print_report=print_report,
            stream=stream,
        )

    @property
    def report(self) -> Report | None:
        """The report of the last fit (``None`` before one ends)."""
        return self._session.report

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._session.start(pl_module, type(pl_module))

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(trainer)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self._session.running:
            self._session.stop(exception)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit" and self._session.running:
            self._session.stop()

    def _finish(self, trainer: Any) -> None:
        report = self._session.stop()
        if report is None:
            return
        zero = bool(getattr(trainer, "is_global_zero", True))
        if zero:
            counts = finding_counts(report)
            for logger in getattr(trainer, "loggers", None) or ():
                logger.log_metrics(counts, step=int(getattr(trainer, "global_step", 0)))
        self._session.conclude(main_process=zero)
