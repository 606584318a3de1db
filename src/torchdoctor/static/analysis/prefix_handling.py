"""Where a project copes with the ``module.`` prefix that DDP and DataParallel give keys.

A checkpoint saved from a wrapper's ``state_dict()`` has every key prefixed; whether that
breaks a load depends on the loaders. A project whose code strips the prefix
(``k.replace("module.", "")``, ``k[7:]`` on a key, ``consume_prefix_in_state_dict_if_present``)
or tests for it (``k.startswith("module.")``) knows about it: its own loads cope.
Searched in the file and the project's files along the same folder line, as text, once.
"""

from __future__ import annotations

import os
import re

from torchdoctor.static.context import FileContext
from torchdoctor.static.files import read_source

__all__ = ["project_prefix_handling"]

_HANDLING = re.compile(
    rb"""['"]module\.['"]|consume_prefix_in_state_dict_if_present|\[\s*7\s*:\s*\]"""
)


def project_prefix_handling(ctx: FileContext) -> tuple[str, int] | None:
    """``(path, line)`` of code that strips or tests the ``module.`` prefix, in this file
    or in another file in its folder, a folder above or below it."""
    own = _first_handling(ctx.source.encode("utf-8", "replace"))
    if own is not None:
        return ctx.path, own
    project = ctx.project
    folder = os.path.dirname(os.path.abspath(ctx.path))
    return project.remember(
        f"module-prefix-handling:{folder}", lambda: _in_other_files(project.paths(), folder)
    )


def _in_other_files(paths: list[str], folder: str) -> tuple[str, int] | None:
    for path in sorted(paths):
        if not _related(os.path.dirname(path), folder):
            continue
        data = read_source(path)
        if not isinstance(data, bytes) or b"module" not in data:
            continue
        line = _first_handling(data)
        if line is not None:
            return os.path.relpath(path), line
    return None


def _first_handling(data: bytes) -> int | None:
    """The first line (1-based) that handles the prefix: it names ``module`` and strips or
    tests it; comments are skipped."""
    if b"module" not in data:
        return None
    for number, line in enumerate(data.splitlines(), 1):
        code = line.split(b"#", 1)[0]
        if b"module" in code and _HANDLING.search(code):
            return number
    return None


def _related(one: str, other: str) -> bool:
    """One folder is the other or lies inside it."""
    return one == other or one.startswith(other + os.sep) or other.startswith(one + os.sep)
