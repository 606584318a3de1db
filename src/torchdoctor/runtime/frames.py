"""Finding the user's own code on the stack, cheaply and only when asked.

A file is *user code* unless it lives in the standard library, in an installed package
(site-packages), in torch, in torchdoctor, or among the environment's console-script
launchers (``.venv/bin/torchdoctor``). The script that ``torchdoctor run`` executes is
always the user's, even when it lives inside one of those directories (the bundled demo
lives in torchdoctor's own package). A stack walk stops at :mod:`runpy`: whatever called
runpy (``torchdoctor run``'s command line, click, the entry point) launched the user's
code and is never part of it, so no location can point there. The answer is cached per
file name, so a stack walk costs a dictionary lookup per frame. Which files are the user's
is decided once, in :mod:`torchdoctor._usercode`, for ``check``, the exception and warning
explainers and ``ckpt`` too; it also keeps the one registry of run scripts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType, TracebackType

from torchdoctor._usercode import (
    RUNPY_FILES,
    is_run_script,
    is_torch_file,
    is_torchdoctor_file,
    is_user_file,
)
from torchdoctor.runtime.detectors.base import CallSite

__all__ = ["UserCode"]

# What a frame's file is to first_outside_torch: torch's or torchdoctor's (walk on), the
# caller's (stop there), or runpy's (the launcher: stop, no caller).
_INSIDE, _OUTSIDE, _RUNPY = 0, 1, 2


class UserCode:
    """Tells user frames from library frames.

    Args:
        roots: directories of the user's code (the script's folder), for the report. Any
            file outside the library directories counts as the user's, so a project's own
            packages next to the script are recognised too.
        scripts: files that are the user's wherever they live (the script that
            ``torchdoctor run`` executes), for this instance, on top of the process's
            registry of run scripts (:func:`torchdoctor._usercode.add_run_script`); the
            one classifier, :func:`torchdoctor._usercode.is_user_file`, decides.
    """

    def __init__(self, roots: Sequence[Path] = (), scripts: Sequence[Path] = ()) -> None:
        self.roots: tuple[Path, ...] = tuple(Path(r).resolve() for r in roots)
        self.scripts = frozenset(os.path.realpath(s) for s in scripts)
        self._cache: dict[str, bool] = {}
        self._outside_torch: dict[str, bool] = {}
        self._frame_kinds: dict[str, int] = {}  # file -> _INSIDE, _OUTSIDE or _RUNPY

    def is_user_file(self, filename: str) -> bool:
        """Whether ``filename`` (as in ``code.co_filename``) is the user's code."""
        cached = self._cache.get(filename)
        if cached is None:
            cached = self._classify(filename)
            self._cache[filename] = cached
        return cached

    def _classify(self, filename: str) -> bool:
        return is_user_file(filename, scripts=self.scripts)

    def site(
        self, frame: FrameType | None, skip: Callable[[FrameType], bool] | None = None
    ) -> CallSite | None:
        """The innermost user frame at or above ``frame``, below any runpy launcher, that
        ``skip`` (if given) does not pass over."""
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename in RUNPY_FILES:
                return None
            if self.is_user_file(filename) and not (skip is not None and skip(frame)):
                return CallSite(filename, frame.f_lineno, frame.f_code.co_name, True)
            frame = frame.f_back
        return None

    def outside_torch(self, filename: str) -> bool:
        """Whether a file is neither torch's nor torchdoctor's (cached); the run script is
        always outside."""
        outside = self._outside_torch.get(filename)
        if outside is None:
            outside = (
                bool(filename)
                and not filename.startswith("<")
                and (
                    is_run_script(filename, scripts=self.scripts)
                    or not (is_torch_file(filename) or is_torchdoctor_file(filename))
                )
            )
            self._outside_torch[filename] = outside
        return outside

    def first_outside_torch(self, frame: FrameType | None) -> FrameType | None:
        """The first frame at or above ``frame`` that is not inside torch or torchdoctor,
        below any runpy launcher."""
        # Runs at every backward pass: one dictionary lookup per frame.
        kinds = self._frame_kinds
        while frame is not None:
            filename = frame.f_code.co_filename
            kind = kinds.get(filename)
            if kind is None:
                kind = kinds[filename] = self._frame_kind(filename)
            if kind == _OUTSIDE:
                return frame
            if kind == _RUNPY:
                return None
            frame = frame.f_back
        return None

    def _frame_kind(self, filename: str) -> int:
        if filename in RUNPY_FILES:
            return _RUNPY
        return _OUTSIDE if self.outside_torch(filename) else _INSIDE

    def caller_outside_torch(self, frame: FrameType | None) -> CallSite | None:
        """Where torch was called from: :meth:`first_outside_torch` as a call site.

        Used as a cheap key for "where was this called from" on every backward call. When
        that frame is a library's (Lightning's loop), the innermost user frame above it is
        returned instead when there is one; otherwise the library frame, flagged by
        ``CallSite.user`` being false, so that callers can leave its path out.
        """
        frame = self.first_outside_torch(frame)
        if frame is None:
            return None
        code = frame.f_code
        if self.is_user_file(code.co_filename):
            return CallSite(code.co_filename, frame.f_lineno, code.co_name, True)
        return self.site(frame) or CallSite(code.co_filename, frame.f_lineno, code.co_name, False)

    def site_from_traceback(self, tb: TracebackType | None) -> CallSite | None:
        """The deepest user frame of a traceback (where the user's code called in)."""
        found: CallSite | None = None
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename in RUNPY_FILES:
                found = None  # what came before launched the user's code
            elif self.is_user_file(code.co_filename):
                found = CallSite(code.co_filename, tb.tb_lineno, code.co_name, True)
            tb = tb.tb_next
        return found
