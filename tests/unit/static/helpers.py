"""A tiny helper for lint rule tests: ``lint_codes(source, "TD201") == [("TD201", 7)]``.

The source is dedented, so tests can indent it with the test body. A rule crash (TD001)
fails the test loudly instead of hiding among the results.
"""

from __future__ import annotations

import textwrap

from torchdoctor.findings import Finding
from torchdoctor.static import lint_source


def lint_findings(source: str, *codes: str, path: str = "train.py") -> list[Finding]:
    """Findings of ``codes`` (all codes when none given) for a dedented source."""
    found = lint_source(textwrap.dedent(source), path, select=codes or None)
    crashes = [f.message for f in found if f.code == "TD001"]
    assert not crashes, f"a lint rule crashed: {crashes}"
    return found


def lint_codes(source: str, *codes: str, path: str = "train.py") -> list[tuple[str, int]]:
    """``(code, line)`` of every finding of ``codes`` (all codes when none given)."""
    return [(f.code, f.location.line or 0) for f in lint_findings(source, *codes, path=path)]
