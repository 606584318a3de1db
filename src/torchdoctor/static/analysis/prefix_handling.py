"""Where a project copes with the ``module.`` prefix that DDP and DataParallel give keys.

A checkpoint saved from a wrapper's ``state_dict()`` has every key prefixed; whether that
breaks a load depends on the loaders. A project whose code strips the prefix
(``k.replace("module.", "")``, ``k[7:]`` on a key, ``consume_prefix_in_state_dict_if_present``)
or tests for it (``k.startswith("module.")``) knows about it: its own loads cope.
Searched as text in the file, the project's files along the same folder line, and the
project modules the file imports (a ``utils`` package beside the training folder). The
same places tell whether the project loads a checkpoint back at all: where nothing does,
the prefix breaks no load the linter can see.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import cast

from torchdoctor.static.analysis.related_files import (
    first_in_imported_files,
    first_in_related_files,
)
from torchdoctor.static.context import FileContext

__all__ = ["project_checkpoint_load", "project_prefix_handling"]

_HANDLING = re.compile(
    rb"""['"]module\.['"]|consume_prefix_in_state_dict_if_present|\[\s*7\s*:\s*\]"""
    rb"""|startswith\(\s*['"]module"""
)


def project_prefix_handling(ctx: FileContext) -> tuple[str, int] | None:
    """``(path, line)`` of code that strips or tests the ``module.`` prefix, in this file
    or in another file in its folder, a folder above or below it."""
    return _first_in_project(ctx, "module-prefix-handling", _first_handling)


def project_checkpoint_load(ctx: FileContext) -> tuple[str, int] | None:
    """``(path, line)`` of a checkpoint load (``torch.load``, ``load_state_dict``, a
    ``load_checkpoint`` helper, safetensors) in this file, a file along its folder line
    or a project module it imports."""
    return _first_in_project(ctx, "checkpoint-load", _first_load)


def _first_in_project(
    ctx: FileContext, question: str, first_line: Callable[[bytes], int | None]
) -> tuple[str, int] | None:
    """The first ``(path, line)`` where ``first_line`` finds something: in the file
    itself, then along its folder line, then in the project modules it imports; once
    per file, however many saves ask."""
    key = ("TD805", question)
    if key not in ctx.memo:

        def found_in(path: str, data: bytes) -> tuple[str, int] | None:
            line = first_line(data)
            return None if line is None else (os.path.relpath(path), line)

        own = first_line(ctx.source.encode("utf-8", "replace"))
        ctx.memo[key] = (
            (ctx.path, own)
            if own is not None
            else first_in_related_files(ctx, question, found_in)
            or first_in_imported_files(ctx, found_in)
        )
    return cast("tuple[str, int] | None", ctx.memo[key])


_LOAD = re.compile(
    rb"""\b(?:torch|th|T|pt)\.load\s*\(|load_state_dict\s*\(|\bload_(?:checkpoint|model|weights"""
    rb"""|pretrained|file|ckpt|state)\w*\s*\(|safetensors|\bfrom\s+torch\s+import\s+[^\n]*\bload\b"""
)


def _first_load(data: bytes) -> int | None:
    """The first line (1-based) that loads a checkpoint, comments skipped."""
    if _LOAD.search(data) is None:
        return None
    for number, line in enumerate(data.splitlines(), 1):
        if _LOAD.search(line.split(b"#", 1)[0]):
            return number
    return None


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
