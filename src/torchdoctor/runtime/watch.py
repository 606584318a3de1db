"""``torchdoctor.watch()``: monitor a training run from inside the program.

::

    with torchdoctor.watch() as w:          # models and optimizers found automatically
        train(model, loader, optimizer)
    print(render(w.report))

    with torchdoctor.watch(model, optimizer, max_steps=200) as w:
        train(...)                          # stops cleanly after 200 optimizer steps
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from torchdoctor.errors import UsageError
from torchdoctor.findings import Report
from torchdoctor.rules.selection import Selection
from torchdoctor.runtime.monitor import Monitor, MonitorOptions, StopTraining, active_monitor

__all__ = ["Watch", "watch"]


class Watch:
    """A monitored stretch of a program; use :func:`watch` to make one.

    Use it as a context manager, or call :meth:`start` and :meth:`stop` (notebooks).
    While it runs, every optimizer step of the watched optimizers is seen; when it ends,
    :attr:`report` holds the findings and the facts of the run.

    Guarantees: the training results are unchanged (no RNG is drawn, no mode, flag, grad or
    parameter is touched), every hook is removed at the end, and an error inside torchdoctor
    becomes a ``TD001`` finding instead of an exception in the training code.
    """

    def __init__(self, options: MonitorOptions, models: list[Any], optimizers: list[Any]) -> None:
        self._options = options
        self._models = models
        self._optimizers = optimizers
        self._monitor: Monitor | None = None
        self._outer: Monitor | None = None
        self._report: Report | None = None

    def start(self) -> Watch:
        """Attach the monitor.

        Under ``torchdoctor run`` the run's monitor already watches the process; the
        block then reads its findings instead of attaching a second monitor.

        Raises:
            UsageError: already started, or another watch() is active in this process.
            TorchMissingError: torch is not installed.
        """
        if self._monitor is not None or self._report is not None:
            raise UsageError("this watch() was already started; make a new one")
        outer = active_monitor()
        if outer is not None and outer.options.command == "run":
            # A script that uses watch() itself, run by `torchdoctor run`: the run's
            # monitor already sees everything, so this block only reads its findings.
            self._outer = outer
            return self
        if outer is not None and outer.detachable:
            # An earlier watch().start() never stopped (a notebook cell run again): it
            # ends here, and its stop() returns what it saw.
            outer.finish()
        monitor = Monitor(self._options, self._models, self._optimizers)
        monitor.attach()
        monitor.detachable = True
        self._monitor = monitor
        return self

    def stop(self, exc: BaseException | None = None) -> Report:
        """Detach the monitor and build the report (idempotent)."""
        if self._report is None and self._outer is not None:
            self._report = self.report
            self._outer = None
        if self._report is None:
            if self._monitor is None:
                raise UsageError("this watch() was never started")
            self._report = self._monitor.finish(exc)
            self._monitor = None
        return self._report

    def __enter__(self) -> Watch:
        self.start()
        if self._monitor is not None:
            self._monitor.detachable = False  # a with block ends where it ends
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self.stop(exc)
        return isinstance(exc, StopTraining)  # max_steps reached: a clean end

    @property
    def report(self) -> Report:
        """The report: final after the block, the findings so far while it runs."""
        if self._report is not None:
            return self._report
        monitor = self._monitor or self._outer
        if monitor is None:
            raise UsageError("this watch() was never started")
        if monitor.final_report is not None:  # ended by a later watch().start()
            return monitor.final_report
        report = Report(command=self._options.command)
        report.extend(monitor.dispatch.findings.values())
        return report

    @property
    def step(self) -> int:
        """Optimizer steps seen so far."""
        monitor = self._monitor or self._outer
        if monitor is not None and monitor.final_report is not None:
            return int(monitor.final_report.facts.get("steps", 0))
        if monitor is not None:
            return monitor.global_step
        return int(self._report.facts.get("steps", 0)) if self._report is not None else 0


def watch(
    model: Any = None,
    optimizer: Any = None,
    *,
    max_steps: int | None = None,
    sample_every: int | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    status_line: bool | None = False,
    localise_non_finite: bool = False,
    status: bool | None = None,
    detectors: Iterable[Any] = (),
    _caller: str | None = None,
) -> Watch:
    """Watch the training that runs inside the returned context manager.

    Args:
        model: a module, or several; ``None`` finds the models from the modules called
            during the first optimizer steps.
        optimizer: an optimizer, or several, to watch; ``None`` watches every optimizer.
        max_steps: stop after this many optimizer steps: ``step()`` raises
            :class:`~torchdoctor.runtime.monitor.StopTraining`, which the ``with`` block
            swallows, so the code after the block runs.
        sample_every: compute full statistics every N steps; ``None`` uses a schedule that
            is dense at the start and then keeps the monitor's cost near 1% of step time.
        select: rule codes or prefixes to report (``"TD2"``); default all.
        ignore: rule codes or prefixes not to report.
        status_line: show a live status line on standard error: ``True`` always,
            ``None`` only when standard error is a terminal, ``False`` never.
        localise_non_finite: check every module's output for NaN/Inf from the first step
            (slower), to name the module where NaN/Inf starts even when the very first
            bad step already poisons every parameter. By default the check starts after
            the first symptom and costs nothing before.
        status: the former name of ``status_line``, kept for old callers: ``True`` means
            ``status_line=None`` (only on a terminal).
        detectors: your own detectors, instances of :class:`torchdoctor.custom.Detector`;
            their findings join the report like the built-in ones.

    Returns:
        A :class:`Watch`; after the block, ``w.report`` is the
        :class:`~torchdoctor.findings.Report`.

    Raises:
        UsageError: a detector is not a :class:`torchdoctor.custom.Detector` instance or
            declares no rule (raised when the watch starts).
    """
    caller = _caller if _caller is not None else sys._getframe(1).f_code.co_filename
    roots = (Path(caller).resolve().parent,) if not caller.startswith("<") else ()
    if status is not None:
        status_line = None if status else False
    options = MonitorOptions(
        command="watch",
        max_steps=max_steps,
        sample_every=sample_every,
        selection=Selection.from_options(select, ignore),
        status=status_line,
        roots=roots,
        localise_non_finite=localise_non_finite,
        detectors=tuple(detectors),
    )
    return Watch(options, _as_list(model), _as_list(optimizer))


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    return [value]
