"""The live status line: step, loss, steps/s and findings so far, on a terminal only.

It writes to standard error, redraws at most a few times a second, and is off whenever
standard error is not a terminal, so logs and CI output never contain it.
"""

from __future__ import annotations

import math
import sys
from typing import TextIO

__all__ = ["StatusLine"]

_REDRAW_S = 0.25


class StatusLine:
    """A single self-overwriting line on a terminal.

    Args:
        enabled: ``True`` / ``False`` to force; ``None`` shows it when ``stream`` is a TTY.
        stream: where to draw (standard error by default).
    """

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self._stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._last_draw = -math.inf
        self._first: tuple[float, int] | None = None
        self._shown = False

    def update(self, now: float, step: int, loss: float | None, findings: int) -> None:
        """Redraw if enough time passed since the last redraw (cheap when it did not)."""
        if not self.enabled:
            return
        if self._first is None:
            self._first = (now, step)
        if now - self._last_draw < _REDRAW_S:
            return
        self._last_draw = now
        self._stream.write("\r\x1b[K" + self.text(now, step, loss, findings) + "\r")
        self._stream.flush()
        self._shown = True

    def text(self, now: float, step: int, loss: float | None, findings: int) -> str:
        """The status text (without terminal control codes)."""
        parts = [f"torchdoctor: step {step}"]
        if loss is not None:
            parts.append(f"loss {loss:.4g}")
        if self._first is not None and now > self._first[0] and step > self._first[1]:
            parts.append(f"{(step - self._first[1]) / (now - self._first[0]):.1f} steps/s")
        parts.append(f"{findings} finding{'s' if findings != 1 else ''}")
        return " | ".join(parts)

    def clear(self) -> None:
        """Erase the line (end of the run)."""
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False
