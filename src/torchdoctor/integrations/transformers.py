"""torchdoctor's runtime detectors inside a Hugging Face Transformers ``Trainer``.

::

    from torchdoctor.integrations.transformers import DoctorCallback

    doctor = DoctorCallback(fail_on="error")
    trainer = Trainer(model=model, args=args, train_dataset=train, callbacks=[doctor])
    trainer.train()
    doctor.report                      # the Report of the training

The watch starts at ``on_train_begin`` and ends at ``on_train_end``. The Trainer's own
``zero_grad``, gradient accumulation, AMP and evaluation loops are ordinary ``torch``
calls that the monitor sees once each (the optimizer wrapper of ``accelerate`` steps the
real optimizer once), so a correct training gives no finding. At the end the report is
printed on the main process, the finding counts are appended to ``state.log_history``
(``torchdoctor/errors``, ``torchdoctor/warnings``, ``torchdoctor/info``), and with
``fail_on`` the training raises :class:`FindingsError`. A training that raises leaves its
watch to be closed by the next ``train()`` or watch in the process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

from transformers import TrainerCallback

from torchdoctor.findings import Report, Severity
from torchdoctor.integrations._session import FindingsError, FitSession, finding_counts

__all__ = ["DoctorCallback", "FindingsError"]


class DoctorCallback(TrainerCallback):  # type: ignore[misc,unused-ignore]
    """Watch a Hugging Face ``Trainer`` run with torchdoctor's runtime detectors.

    Args:
        fail_on: ``"error"``, ``"warning"`` or ``"info"``: raise :class:`FindingsError`
            at the end of training when a finding is this bad or worse; ``None``
            (default) never fails.
        select: rule codes or prefixes to report; default all.
        ignore: rule codes or prefixes not to report.
        sample_every: full statistics every N steps (default: dense at first, then cheap).
        print_report: print the text report at the end on the main process.
        stream: where to print it (default standard output).

    Attributes:
        report: the :class:`~torchdoctor.findings.Report` of the last training, or ``None``.
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
        self._session = FitSession(
            framework="Transformers",
            fail_on=fail_on,
            select=select,
            ignore=ignore,
            sample_every=sample_every,
            print_report=print_report,
            stream=stream,
        )

    @property
    def report(self) -> Report | None:
        """The report of the last training (``None`` before one ends)."""
        return self._session.report

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        self._session.start(model, type(model) if model is not None else None)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        report = self._session.stop()
        if report is None:
            return
        main = bool(getattr(state, "is_world_process_zero", True))
        if main:
            entry: dict[str, float] = {
                **finding_counts(report),
                "step": float(getattr(state, "global_step", 0)),
            }
            history = getattr(state, "log_history", None)
            if isinstance(history, list):
                history.append(entry)
        self._session.conclude(main_process=main)
