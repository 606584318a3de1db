"""The user's code failing: where it failed, and whether a rule explains it.

:func:`call_user` runs a piece of the user's code (a factory, a forward, a loss) and turns
its exceptions into :class:`~torchdoctor.errors.UserCodeError` naming the stage, the error
and the user's own ``file:line``. :class:`SharedWorkFailed` is what a probe sees when
shared work failed for a reason a rule explains (a device mismatch, a wrong target dtype):
the engine reports that finding instead of aborting the check.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from torchdoctor.errors import UserCodeError
from torchdoctor.findings import Finding, Location

__all__ = ["SharedWorkFailed", "call_user", "is_out_of_memory", "user_code_error",
           "user_frame"]

T = TypeVar("T")


class SharedWorkFailed(Exception):  # noqa: N818 - a signal between context and engine
    """Shared work failed for a reason a rule explains; carries that rule's finding."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _foreign_roots() -> tuple[str, ...]:
    import torchdoctor

    roots = [os.path.dirname(torchdoctor.__file__), sysconfig.get_paths()["stdlib"]]
    try:
        import torch

        roots.append(os.path.dirname(torch.__file__))
    except ImportError:  # pragma: no cover - the check depth always has torch
        pass
    return tuple(os.path.realpath(root) + os.sep for root in roots)


def _is_user_file(filename: str, roots: tuple[str, ...]) -> bool:
    if filename.startswith("<"):
        return False
    return not os.path.realpath(filename).startswith(roots)


def user_frame(frames: list[traceback.FrameSummary], *, inside_model: bool = False
               ) -> traceback.FrameSummary | None:
    """The innermost frame that belongs to the user's code (not torch, us or the stdlib).

    With ``inside_model``, only frames below the first ``nn.Module`` call count: a full
    stack also holds the callers of the model (a test runner, a CLI), which are not where
    a value was computed.
    """
    roots = _foreign_roots()
    if inside_model:
        calls = [i for i, f in enumerate(frames)
                 if f.filename.replace(os.sep, "/").endswith("torch/nn/modules/module.py")]
        frames = frames[calls[0] + 1:] if calls else frames
    for frame in reversed(frames):
        if _is_user_file(frame.filename, roots):
            return frame
    return None


def error_location(error: BaseException, module_path: str | None = None) -> Location:
    """Where ``error`` was raised in the user's code, plus the module that was running."""
    frame = user_frame(traceback.extract_tb(error.__traceback__))
    if frame is None:
        return Location(object=module_path or None)
    return Location(path=frame.filename, line=frame.lineno, object=module_path or None,
                    snippet=(frame.line or None))


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a host or device out-of-memory error."""
    if isinstance(error, MemoryError):
        return True
    return type(error).__name__ == "OutOfMemoryError" or "out of memory" in str(error)


def user_code_error(stage: str, error: BaseException, module_path: str | None = None
                    ) -> UserCodeError:
    """A :class:`UserCodeError` saying which stage failed, how, and at which user line."""
    location = error_location(error, module_path)
    where = f"{location.path}:{location.line}" if location.path else None
    detail = f"{type(error).__name__}: {error}".strip()
    if len(detail) > 400:
        detail = detail[:400] + "..."
    parts = [f"{stage} raised {detail}"]
    if where:
        parts.append(f"at {where}")
    if module_path:
        parts.append(f"(in module `{module_path}`)")
    message = " ".join(parts)
    if is_out_of_memory(error):
        message = (f"{stage} ran out of memory ({detail}); retry with a smaller batch or "
                   "model, or on a device with more memory")
    return UserCodeError(message, original=error, where=where)


def call_user(stage: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call user code; its exceptions become :class:`UserCodeError` naming ``stage``.

    ``KeyboardInterrupt`` passes through untouched so Ctrl-C stops the check.
    """
    try:
        return function(*args, **kwargs)
    except UserCodeError:
        raise
    except (Exception, SystemExit) as error:  # noqa: BLE001 - whatever the user's code raises
        raise user_code_error(stage, error) from error
