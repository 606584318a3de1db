"""The records the exception explainer passes around: what was raised, where, and the answer.

:class:`ErrorFacts` is everything known about one exception once its message matched a
known error; a detail function turns it into a :class:`Detail`, the specific sentence,
fixes and evidence of the finding.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.runtime.exceptions.frames import FrameRef, ModuleRef

__all__ = [
    "DEVICE_MISMATCH_CODE",
    "Detail",
    "DetailFunction",
    "ErrorFacts",
    "format_bytes",
    "torch_module",
]

# A device mismatch is one problem at every depth: TD101, whether `check` finds it before
# the run or the run dies of it (TD004 stays "the script raised something else").
DEVICE_MISMATCH_CODE = "TD101"


@dataclass(frozen=True, slots=True)
class ErrorFacts:
    """One exception and its surroundings.

    Attributes:
        type_name: the exception's class name (``RuntimeError``).
        text: the exception's whole message.
        match: the known error's pattern matched against ``text``.
        frames: the traceback's frames, outermost first.
        user: the innermost frame of the user's code.
        module: the ``nn.Module`` that was running, when one was.
        models: the models the monitor knows (may be empty).
        optimizers: the optimizers the monitor knows (may be empty).
    """

    type_name: str
    text: str
    match: re.Match[str]
    frames: tuple[FrameRef, ...] = ()
    user: FrameRef | None = None
    module: ModuleRef | None = None
    models: tuple[Any, ...] = ()
    optimizers: tuple[Any, ...] = ()

    def group(self, name: str) -> str:
        """A named group of the match, ``""`` when it did not take part.

        A pattern with several wordings names the same value ``name``, ``name2``,
        ``name3`` ... in its alternatives (a regex group name must be unique); the first
        that took part is returned.
        """
        groups = self.match.groupdict()
        for suffix in ("", "2", "3", "4"):
            value = groups.get(name + suffix)
            if value:
                return value
        return ""

    def frame_named(self, *functions: str) -> FrameRef | None:
        """The innermost frame running one of ``functions`` (e.g. ``cross_entropy``)."""
        for frame in reversed(self.frames):
            if frame.function in functions:
                return frame
        return None

    @property
    def module_label(self) -> str:
        """How messages name the running module: ``head (Linear)`` or ``the model``."""
        return self.module.described if self.module else "the model"


@dataclass(frozen=True, slots=True)
class Detail:
    """The specific explanation of one occurrence of a known error.

    Attributes:
        summary: the sentence saying what went wrong, with the numbers.
        fixes: imperative fixes, most likely first.
        evidence: the measured facts behind ``summary`` (JSON-serialisable).
        code: a rule code that overrides the known error's own, when the facts show a
            different problem (a "type" message that is really about devices).
        line: a better line in the user's frame's file than the one that raised (the
            ``for`` statement of a DataLoader loop).
        asynchronous: the error was delivered by a signal at an arbitrary point, so the
            module that happened to be running is not named.
    """

    summary: str
    fixes: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)
    code: str | None = None
    line: int | None = None
    asynchronous: bool = False


DetailFunction = Callable[[ErrorFacts], "Detail | None"]


def torch_module() -> Any:
    """The imported torch module, or ``None`` (the explainer never imports it itself)."""
    return sys.modules.get("torch")


def format_bytes(count: float) -> str:
    """``1536`` -> ``"1.5 KiB"``: binary units, one decimal under 100."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
