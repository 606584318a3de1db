"""Where a project copes with the ``module.`` prefix that DDP and DataParallel give keys.

A checkpoint saved from a wrapper's ``state_dict()`` has every key prefixed; whether that
breaks a load depends on the loaders. A project whose code strips the prefix
(``k.replace("module.", "")``, ``k[7:]`` on a key, ``consume_prefix_in_state_dict_if_present``)
or tests for it (``k.startswith("module.")``) knows about it: its own loads cope.
Searched as text in the file, the project's files along the same folder line, and the
project modules the file imports (a ``utils`` package beside the training folder).
"""

from __future__ import annotations

import os
import re
from typing import cast

from torchdoctor.static.analysis.related_files import (
    first_in_imported_files,
    first_in_related_files,
)
from torchdoctor.static.context import FileContext

__all__ = ["project_prefix_handling"]

_HANDLING = re.compile(
    rb"""['"]module\.['"]|consume_prefix_in_state_dict_if_present|\[\s*7\s*:\s*\]"""
    rb"""|startswith\(\s*['"]module"""
)


def project_prefix_handling(ctx: FileContext) -> tuple[str, int] | None:
    """``(path, line)`` of code that strips or tests the ``module.`` prefix, in this file
    or in another file in its folder, a folder above or below it."""
    key = ("TD805", "prefix-handling")
    if key not in ctx.memo:  # once per file, however many saves it reports
        own = _first_handling(ctx.source.encode("utf-8", "replace"))
        ctx.memo[key] = (
            (ctx.path, own)
            if own is not None
            else first_in_related_files(ctx, "module-prefix-handling", _handling_in)
            or first_in_imported_files(ctx, _handling_in)
        )
    return cast("tuple[str, int] | None", ctx.memo[key])


def _handling_in(path: str, data: bytes) -> tuple[str, int] | None:
    line = _first_handling(data)
    return None if line is None else (os.path.relpath(path), line)


_SEVEN = re.compile(rb"\[\s*7\s*:\s*\]")


def _first_handling(data: bytes) -> int | None:
    """The first line (1-based) that handles the prefix: it names ``module`` and strips or
    tests it, or slices ``[7:]`` (the length of ``module.``) off a key within a few lines
    of a state dict; comments are skipped."""
    if b"module" not in data and _SEVEN.search(data) is None:
        return None
    lines = [line.split(b"#", 1)[0] for line in data.splitlines()]
    for number, code in enumerate(lines, 1):
        if b"module" in code and _HANDLING.search(code):
            return number
        if _SEVEN.search(code) and any(
            b"state_dict" in near or b"module" in near
            for near in lines[max(0, number - 4) : number]
        ):
            return number
    return None
