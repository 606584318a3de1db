"""Applying automatic fixes: text edits at node positions, formatting preserved.

A :class:`~torchdoctor.findings.Fix` is applied whole or not at all. Fixes whose edits
overlap an already accepted one wait for the next round; rounds repeat (re-linting the
fixed text) until nothing more applies, so the result is stable and a second run changes
nothing. Only ``SAFE`` fixes apply unless unsafe ones are asked for. Nothing is written
unless the caller says so, and then only files whose text changed, in their original
encoding and line endings.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from torchdoctor.findings import Applicability, Edit, Finding, Fix
from torchdoctor.rules.selection import Selection
from torchdoctor.static.runner import FileJob, lint_text
from torchdoctor.static.source import decode, encode

__all__ = ["FileFix", "apply_fixes", "fix_file", "unified_diff", "write_fix"]

_MAX_ROUNDS = 10
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class FileFix:
    """What fixing one file gave: its text before and after, and how many fixes applied."""

    path: str
    original: str
    fixed: str
    encoding: str
    applied: int

    @property
    def changed(self) -> bool:
        """Whether the text changed."""
        return self.fixed != self.original


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(match.end() for match in _LINE_END.finditer(text))
    return starts


def _offset(starts: list[int], text: str, line: int, column: int) -> int:
    if line - 1 >= len(starts):
        return len(text)
    start = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    return min(start + column, end)


def apply_fixes(text: str, fixes: Sequence[Fix]) -> tuple[str, int]:
    """Apply every fix that does not overlap an earlier one; return the text and count.

    Fixes are taken in order of their first edit's position; a fix is skipped whole when
    any of its edits touches a range an accepted fix already changes (two insertions at
    one point count as touching). Identical fixes apply once.
    """
    starts = _line_starts(text)
    planned: list[tuple[int, int, str]] = []
    accepted = 0
    seen: set[tuple[Edit, ...]] = set()
    ranked = sorted(
        fixes,
        key=lambda f: min((e.start_line, e.start_column) for e in f.edits) if f.edits else (0, 0),
    )
    for fix in ranked:
        if not fix.edits or fix.edits in seen:
            continue
        ranges = [
            (
                _offset(starts, text, e.start_line, e.start_column),
                _offset(starts, text, e.end_line, e.end_column),
                e.replacement,
            )
            for e in fix.edits
        ]
        if any(start > end for start, end, _ in ranges) or _overlaps(ranges, planned):
            continue
        seen.add(fix.edits)
        planned.extend(ranges)
        accepted += 1
    for start, end, replacement in sorted(planned, key=lambda r: (r[0], r[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, accepted


def _overlaps(ranges: list[tuple[int, int, str]], planned: list[tuple[int, int, str]]) -> bool:
    for start, end, _ in ranges:
        for other_start, other_end, _ in planned:
            if start == other_start or (start < other_end and other_start < end):
                return True
    for index, (start, end, _) in enumerate(ranges):
        for other_start, other_end, _ in ranges[index + 1 :]:
            if start == other_start or (start < other_end and other_start < end):
                return True
    return False


def _wanted(finding: Finding, unsafe: bool) -> Fix | None:
    fix = finding.fix
    if fix is None:
        return None
    return fix if unsafe or fix.applicability is Applicability.SAFE else None


def fix_file(job: FileJob, selection: Selection, *, unsafe: bool = False) -> FileFix | None:
    """Fix one file in memory, round after round until stable. ``None`` when the file
    cannot be read or decoded (lint reports why)."""
    from torchdoctor.static.files import read_source

    data = read_source(job.path) if job.max_bytes is None else read_source(job.path, job.max_bytes)
    if isinstance(data, Finding):
        return None
    decoded = decode(data, job.path)
    if isinstance(decoded, Finding):
        return None
    original, encoding = decoded
    # A file whose every line ends in CRLF is fixed as LF text (fixes insert "\n") and
    # written back with CRLF; a file with mixed endings is left as it is.
    crlf = "\r\n" in original and original.count("\r\n") == original.count("\n")
    text, applied = (original.replace("\r\n", "\n") if crlf else original), 0
    for _ in range(_MAX_ROUNDS):
        found = [
            f
            for f in lint_text(job.path, text, selection)
            if not any(f.code.startswith(p) for p in job.ignored)
        ]
        fixes = [fix for fix in (_wanted(f, unsafe) for f in found) if fix is not None]
        if not fixes:
            break
        new_text, count = apply_fixes(text, fixes)
        if count == 0 or new_text == text:
            break
        text, applied = new_text, applied + count
    if crlf:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return FileFix(job.path, original, text if applied else original, encoding, applied)


def unified_diff(result: FileFix) -> str:
    """The change of one file as a unified diff (``--- a/path`` / ``+++ b/path``)."""
    lines = difflib.unified_diff(
        result.original.splitlines(keepends=True),
        result.fixed.splitlines(keepends=True),
        fromfile=f"a/{result.path}",
        tofile=f"b/{result.path}",
    )
    out = "".join(line if line.endswith(("\n", "\r")) else line + "\n" for line in lines)
    return out


def write_fix(result: FileFix) -> None:
    """Write a fixed file in place, atomically, keeping its encoding and permissions; a
    symlink is written through (its target changes, the link stays a link)."""
    if not result.changed:
        return
    path = os.path.realpath(result.path) if os.path.islink(result.path) else result.path
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".torchdoctor-", suffix=".py")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(encode(result.fixed, result.encoding))
        os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
