"""A wall-clock budget per probe, so that ``check`` ends whatever the user's code does.

A DataLoader that never yields, a forward that sleeps or waits on a lock would otherwise
hang ``check`` forever. While a probe runs, an interval timer (``SIGALRM``) is armed; when
the budget is spent, the handler raises :class:`ProbeTimeout` where the user's code stands
(a ``BaseException``, so ``except Exception`` in that code does not swallow it; the timer
fires again every second until the probe has unwound). The probe's ``with`` block turns it
into a :class:`~torchdoctor.errors.UserCodeError` that names the probe and what it was
waiting for. Without ``SIGALRM`` (Windows) or outside the main thread, probes run unbounded.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from torchdoctor.errors import UsageError, UserCodeError

__all__ = [
    "DEFAULT_PROBE_TIMEOUT",
    "ProbeTimeout",
    "lingering_threads",
    "probe_budget",
    "probe_timeout",
]

DEFAULT_PROBE_TIMEOUT = 60.0
_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "torchdoctor_probe_timeout", default=DEFAULT_PROBE_TIMEOUT
)
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ProbeTimeout(BaseException):  # noqa: N818 - named for what happened, like SystemExit
    """A probe ran past its budget; raised inside the user's code by the timer."""

    torchdoctor_passthrough = True  # not the user's error: call_user lets it through

    def __init__(self, waiting: str) -> None:
        super().__init__(waiting)
        self.waiting = waiting


@contextlib.contextmanager
def probe_timeout(seconds: float | None) -> Iterator[None]:
    """Set the budget of every probe run inside the block (``None`` or 0: unbounded).

    Raises:
        UsageError: a negative budget.
    """
    if seconds is not None and seconds < 0:
        raise UsageError(f"timeout must be positive seconds (or 0 for none), not {seconds}")
    token = _TIMEOUT.set(seconds or None)
    try:
        yield
    finally:
        _TIMEOUT.reset(token)


@contextlib.contextmanager
def probe_budget(name: str) -> Iterator[None]:
    """Run the block (one probe) within the current budget.

    Raises:
        UserCodeError: the budget ran out; the message names the probe and where the
            user's code was waiting.
    """
    seconds = _TIMEOUT.get()
    if (
        not seconds
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    theirs = signal.getitimer(signal.ITIMER_REAL)
    if 0 < theirs[0] <= seconds:  # an outer timer (pytest-timeout, ...) ends first anyway
        yield
        return

    def expired(number: int, frame: FrameType | None) -> None:
        raise ProbeTimeout(_waiting_at(frame))

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    except ProbeTimeout as timeout:
        raise UserCodeError(
            f"check: probe {name} ran out of its {seconds:g} s budget while waiting in "
            f"{timeout.waiting}; a DataLoader that never yields, a forward that blocks or "
            "a lock never released would hang training too (raise the budget with "
            "--timeout, or 0 for none)",
            where=timeout.waiting,
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
        if theirs[0] > 0:  # put the outer timer back, less the time spent here
            left = max(theirs[0] - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, theirs[1])


def _waiting_at(frame: FrameType | None) -> str:
    """Where the main thread stood: the innermost frame, and the innermost frame of code
    other than torchdoctor's, torch's and the standard library's when it differs."""
    if frame is None:
        return "an unknown place"
    inner = _describe(frame)
    current: FrameType | None = frame
    while current is not None:
        path = current.f_code.co_filename
        if not (path.startswith(_OWN) or _library(path)):
            outer = _describe(current)
            return inner if outer == inner else f"{inner}, called from {outer}"
        current = current.f_back
    return inner


def _library(path: str) -> bool:
    return (
        path.startswith("<")
        or os.sep + "torch" + os.sep in path
        or ("site-packages" not in path and "python3" in path and os.sep + "lib" in path)
    )


def _describe(frame: FrameType) -> str:
    return (
        f"`{frame.f_code.co_name}` at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    )


def lingering_threads(before: set[Any]) -> list[str]:
    """Names of non-daemon threads started since ``before`` (a snapshot of
    ``threading.enumerate()``) and still running: the interpreter would wait for them at
    exit, forever if they never end."""
    return [
        thread.name
        for thread in threading.enumerate()
        if thread not in before
        and thread.is_alive()
        and not thread.daemon
        and thread is not threading.main_thread()
    ]
