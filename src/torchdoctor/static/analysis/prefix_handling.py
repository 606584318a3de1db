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


def project_checkpoint_load(ctx: FileContext) -> tuple[str, int] | None:
    """``(path, line)`` of a checkpoint load (``torch.load``, ``load_state_dict``, a
    ``load_checkpoint`` helper, safetensors) in this file, a file along its folder line
    or a project module it imports."""
    key = ("TD805", "checkpoint-load")
    if key not in ctx.memo:
        own = _first_load(ctx.source.encode("utf-8", "replace"))
        ctx.memo[key] = (
            (ctx.path, own)
            if own is not None
            else first_in_related_files(ctx, "checkpoint-load", _load_in)
            or first_in_imported_files(ctx, _load_in)
        )
    return cast("tuple[str, int] | None", ctx.memo[key])


_LOAD = re.compile(
    rb"""\b(?:torch|th|T|pt)\.load\s*\(|load_state_dict\s*\(|\bload_(?:checkpoint|model|weights"""
    rb"""|pretrained|file|ckpt|state)\w*\s*\(|safetensors|\bfrom\s+torch\s+import\s+[^\n]*\bload\b"""
)


def _load_in(path: str, data: bytes) -> tuple[str, int] | None:
    line = _first_load(data)
    return None if line is None else (os.path.relpath(path), line)


def _first_load(data: bytes) -> int | None:
    """The first line (1-based) that loads a checkpoint, comments skipped."""
    if _LOAD.search(data) is None:
        return None
    for number, line in enumerate(data.splitlines(), 1):
        if _LOAD.search(line.split(b"#", 1)[0]):
            return number
    return None


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
