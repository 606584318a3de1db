"""The detector-execution kernel: how every depth runs a detector and survives its bugs.

``lint``, ``check``, ``run``, ``ckpt`` and ``env`` each have their own detectors and their
own way of feeding them (an AST walk, probe steps, training hooks, a checkpoint, the
environment), but they share what happens around a detector:

* **selection**: a detector runs only when one of its codes is selected
  (:func:`wanted`), and only findings of selected codes are kept (:func:`selected`);
  ``TD001`` always passes, so a failure of ours is never hidden by ``--select``;
* **isolation**: a detector that raises becomes one ``TD001`` finding built by
  :func:`internal_error` (the only place that builds one), and the others carry on;
  :func:`run_detector` does both for a detector that is one call;
* **one evidence shape**: every ``TD001`` names the detector, its codes, the exception and
  the line that raised it; its traceback travels under
  :data:`~torchdoctor.findings.TRACEBACK` and a :class:`~torchdoctor.findings.Report` keeps
  it in ``report.facts["internal_errors"]``, which ``torchdoctor --debug`` prints for
  every command.

It also holds the one way a detector reports, at every depth: a :class:`Reporter`, which
builds a finding from the catalogue (:func:`~torchdoctor.rules.registry.finding`) and hands
it to the sink the depth's engine gave it.

This module imports neither torch nor any depth, so ``lint`` can use it.
"""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from torchdoctor.errors import TorchDoctorError
from torchdoctor.findings import (
    INTERNAL_ERROR_CODE,
    TRACEBACK,
    Confidence,
    Depth,
    Finding,
    Fix,
    Location,
    Severity,
)
from torchdoctor.rules.registry import finding
from torchdoctor.rules.selection import Selection

__all__ = ["Reporter", "Sink", "internal_error", "run_detector", "selected", "wanted"]

Sink = Callable[[Finding], None]


class Reporter:
    """The one way a detector reports a finding, at every depth.

    The depth's engine makes one per detector, around its own sink (the lint engine's list
    for a file, the check engine's list for a probe, the run's dispatch, where a finding
    replaces an earlier one of the same rule and place). Lint rules and runtime detectors
    (``TD8xx`` and users' detectors too) hold it and expose :meth:`emit` and ``report``;
    probes and checkpoint and environment checks, which are functions, receive it.

    Args:
        sink: where the findings go.
        depth: the depth the detector runs at; every finding built here has it.
        codes: the codes the detector was registered with; the first is the default code.
    """

    __slots__ = ("codes", "depth", "sink")

    def __init__(self, sink: Sink, depth: Depth, codes: Sequence[str] = ()) -> None:
        self.sink = sink
        self.depth = depth
        self.codes = tuple(codes)

    def __call__(self, item: Finding) -> None:
        """A reporter is a sink too: :meth:`emit`."""
        self.sink(item)

    def emit(self, item: Finding) -> None:
        """Hand over a finding already built (by :func:`~torchdoctor.rules.registry.finding`,
        a verdict function, a user's ``self.finding(...)``)."""
        self.sink(item)

    def report(
        self,
        where: Location,
        message: str,
        *,
        code: str | None = None,
        fix_hint: str = "",
        evidence: Mapping[str, Any] | None = None,
        confidence: Confidence = Confidence.HIGH,
        fix: Fix | None = None,
        severity: Severity | None = None,
    ) -> None:
        """Build a finding of ``code`` (default: the detector's first code) at ``where``,
        with the rule's severity unless ``severity`` is given, and :meth:`emit` it."""
        self.sink(
            finding(
                code or self.codes[0],
                message,
                where,
                self.depth,
                fix_hint=fix_hint,
                evidence=evidence,
                severity=severity,
                confidence=confidence,
                fix=fix,
            )
        )


def wanted(codes: Iterable[str], selection: Selection) -> bool:
    """Whether a detector of ``codes`` should run: one of its codes is selected."""
    return any(selection.is_enabled(code) for code in codes)


def selected(findings: Iterable[Finding], selection: Selection) -> list[Finding]:
    """The findings of selected codes; ``TD001`` always passes."""
    return [f for f in findings if f.code == INTERNAL_ERROR_CODE or selection.is_enabled(f.code)]


def internal_error(
    detector: str,
    error: BaseException | None,
    depth: Depth,
    location: Location,
    *,
    codes: Sequence[str] = (),
    during: str = "",
    consequence: str | None = None,
    message: str | None = None,
) -> Finding:
    """The ``TD001`` finding for a failure of torchdoctor's own code.

    Args:
        detector: what failed, with its kind: ``"lint rule Foo"``, ``"probe loss.bar"``,
            ``"runtime detector `Baz`"``, ``"the monitor"``.
        error: the exception, when there is one.
        depth: the depth it ran at.
        location: where the finding points (the file, or the detector as an object).
        codes: the rules the detector checks (so the user knows what is missing).
        during: where it failed, appended to the message (``" in `on_step_end`"``).
        consequence: what the failure means for the report; by default, that the
            detector's rules were not checked and the other findings are complete.
        message: a complete message instead of the one built from the above.
    """
    listed = ", ".join(codes)
    evidence: dict[str, Any] = {"detector": detector, "codes": list(codes)}
    if error is not None:
        evidence["exception"] = type(error).__name__
        evidence["error"] = f"{type(error).__name__}: {error}"
        frames = traceback.extract_tb(error.__traceback__)
        if frames:
            evidence["at"] = f"{frames[-1].filename}:{frames[-1].lineno}"
        evidence[TRACEBACK] = "".join(traceback.format_exception(error))
    if consequence is None:
        consequence = (
            f"its rules ({listed}) were not checked; " if listed else ""
        ) + "the other findings are complete"
    if message is None:
        failed = f"{type(error).__name__}: {error}" if error is not None else "failed"
        message = (
            f"{detector}{f' ({listed})' if listed else ''} failed{during}: {failed}; {consequence}"
        )
    ignore = f" Meanwhile `--ignore {codes[0]}` skips it." if codes else ""
    return finding(
        INTERNAL_ERROR_CODE,
        message,
        location,
        depth,
        fix_hint="This is a bug in torchdoctor: rerun with `torchdoctor --debug ...` for "
        f"the traceback and report it with this message.{ignore}",
        evidence=evidence,
    )


def raised_by_signal_handler(error: BaseException) -> bool:
    """Whether ``error`` came from a Python signal handler that interrupted our code.

    Such a handler belongs to the user's run (torch's DataLoader raises "worker killed" from
    its SIGCHLD handler, wherever the main thread happens to be): the exception is theirs
    and must reach their program, never be taken for a failure of ours.
    """
    handlers = set()
    for number in signal.valid_signals():
        try:
            code = getattr(signal.getsignal(number), "__code__", None)
        except (ValueError, OSError):
            continue
        if code is not None:
            handlers.add(code)
    frame = error.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code in handlers:
            return True
        frame = frame.tb_next
    return False


def run_detector(
    detector: str,
    codes: Sequence[str],
    call: Callable[[Reporter], object],
    depth: Depth,
    location: Location,
    selection: Selection,
    *,
    on_error: Callable[[Exception], list[Finding] | None] | None = None,
) -> list[Finding]:
    """Run one detector that is a single call, isolated and selected.

    Args:
        detector: its kind and name, for a ``TD001`` (see :func:`internal_error`).
        codes: the rules it checks; it does not run when none is selected.
        call: runs it, reporting through the :class:`Reporter` it is given; it returns
            ``None`` (anything else, such as a generator left from the older way of
            yielding findings, is a bug of the detector: a ``TD001``).
        depth: the depth.
        location: where a ``TD001`` points.
        selection: the user's ``--select``/``--ignore``.
        on_error: consulted first when ``call`` raises: it may re-raise (a user error
            the depth explains itself), return findings to use instead, or return
            ``None`` for the usual ``TD001``.

    Returns:
        The findings of selected codes, or one ``TD001`` finding (what the detector
        reported before it raised is dropped with it).

    Raises:
        TorchDoctorError: raised by the detector on purpose (bad input, the user's code
            failed); it is the user's to see, not a bug of ours.
    """
    if not wanted(codes, selection):
        return []
    found: list[Finding] = []
    try:
        returned = call(Reporter(found.append, depth, codes))
        if returned is not None:  # a generator would report nothing, silently
            raise TypeError(
                f"{detector} returned {type(returned).__name__}: a detector "
                "reports through its Reporter and returns None"
            )
        return selected(found, selection)
    except TorchDoctorError:
        raise
    except Exception as error:  # noqa: BLE001 - one detector's bug must not hide the rest
        instead = on_error(error) if on_error is not None else None
        if instead is not None:
            return selected(instead, selection)
        return [internal_error(detector, error, depth, location, codes=codes)]
