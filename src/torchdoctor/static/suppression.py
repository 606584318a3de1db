"""``# noqa: TD201`` on a line and ``# torchdoctor: noqa`` for a whole file.

Codes match by prefix (``# noqa: TD2`` silences every autograd rule on the line). A bare
``# noqa`` silences other tools' findings, not ours: a blanket comment written for flake8
must not hide a training bug. Codes of other tools in the same comment (``E501``) are
ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from torchdoctor.findings import Finding

__all__ = ["file_suppression", "filter_suppressed"]

_CODES = r"[A-Za-z]+[0-9]*(?:[\s,]+[A-Za-z]+[0-9]*)*"
_LINE = re.compile(r"#\s*noqa\s*:\s*(?P<codes>" + _CODES + ")", re.IGNORECASE)
_FILE = re.compile(
    r"^\s*#\s*torchdoctor\s*:\s*noqa(?:\s*:\s*(?P<codes>" + _CODES + r"))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_ALL: tuple[str, ...] = ("TD",)


def _our_codes(text: str) -> tuple[str, ...]:
    codes = (c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)
    return tuple(c for c in codes if c.startswith("TD"))


def file_suppression(source: str) -> tuple[str, ...]:
    """Code prefixes silenced for the whole file (``("TD",)`` for a bare file-level noqa)."""
    if "torchdoctor" not in source:
        return ()
    prefixes: list[str] = []
    for match in _FILE.finditer(source):
        codes = match.group("codes")
        prefixes.extend(_our_codes(codes) if codes else _ALL)
    return tuple(prefixes)


def line_suppressions(lines: list[str]) -> dict[int, tuple[str, ...]]:
    """1-based line -> code prefixes its ``# noqa: ...`` comment silences."""
    found: dict[int, tuple[str, ...]] = {}
    for number, text in enumerate(lines, start=1):
        if "noqa" not in text and "NOQA" not in text and "Noqa" not in text:
            continue
        match = _LINE.search(text)
        if match:
            codes = _our_codes(match.group("codes"))
            if codes:
                found[number] = codes
    return found


def filter_suppressed(findings: Iterable[Finding], source: str, lines: list[str]) -> list[Finding]:
    """Drop the findings silenced by comments. Internal errors are never silenced."""
    findings = list(findings)
    if not findings:
        return findings
    whole_file = file_suppression(source)
    per_line = line_suppressions(lines) if "noqa" in source.lower() else {}
    if not whole_file and not per_line:
        return findings
    kept = []
    for item in findings:
        code = item.code
        if code == "TD001":
            kept.append(item)
            continue
        if any(code.startswith(p) for p in whole_file):
            continue
        loc = item.location
        places = {loc.line, loc.end_line} - {None}
        if any(code.startswith(p) for line in places for p in per_line.get(line or 0, ())):
            continue
        kept.append(item)
    return kept
