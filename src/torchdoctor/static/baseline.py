"""``--baseline FILE``: report only findings that are not already known.

A baseline is a JSON report written earlier (``torchdoctor lint . --format json -o
baseline.json``). A finding is *known* when the baseline holds one with the same rule, the
same file and the same line text (whitespace-insensitive), so findings survive lines moving
up or down. Equal keys are counted: a second copy of a known problem is new.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from torchdoctor.errors import UsageError
from torchdoctor.findings import Finding

__all__ = ["Baseline", "filter_baseline", "load_baseline"]

Key = tuple[str, str, str]
Baseline = Counter[Key]


def _normal_path(path: str | None) -> str:
    if not path:
        return ""
    if os.path.isabs(path):
        with contextlib.suppress(ValueError):  # another drive on Windows
            path = os.path.relpath(path)
    return Path(os.path.normpath(path)).as_posix()


def _key(finding: Finding) -> Key:
    loc = finding.location
    text = " ".join((loc.snippet or "").split())
    return (finding.code, _normal_path(loc.path), text or f"line {loc.line}")


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline JSON report.

    Raises:
        UsageError: the file is missing or is not a torchdoctor JSON report.
    """
    from torchdoctor.report.json import report_from_json

    try:
        text = Path(path).read_text(encoding="utf-8")
        report = report_from_json(text)
    except OSError as error:
        raise UsageError(f"cannot read baseline {path}: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(
            f"{path} is not a torchdoctor JSON report ({error}); write one "
            "with `torchdoctor lint PATH --format json -o FILE`"
        ) from None
    except RecursionError:
        raise UsageError(
            f"{path} is not a torchdoctor JSON report: it is nested too deeply to read"
        ) from None
    except MemoryError:
        raise UsageError(f"{path} is too large to read as a baseline") from None
    return Counter(_key(f) for f in report.findings)


def filter_baseline(findings: Iterable[Finding], baseline: Baseline) -> tuple[list[Finding], int]:
    """The findings not in ``baseline``, and how many were dropped as known."""
    remaining = Counter(baseline)
    kept: list[Finding] = []
    dropped = 0
    for finding in sorted(findings, key=lambda f: f.sort_key):
        key = _key(finding)
        if remaining[key] > 0 and finding.code != "TD001":
            remaining[key] -= 1
            dropped += 1
        else:
            kept.append(finding)
    return kept, dropped
