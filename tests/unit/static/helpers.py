"""Tiny helpers for lint rule tests.

``lint_codes(source, "TD201") == [("TD201", 7)]``, or, with the expected lines marked in
the source itself (``optimizer.step()  # expect: TD201``), ``assert_marked(source,
"TD201")``. Sources are dedented, so tests can indent them with the test body.

Every rule runs on every test source, whatever codes the test asks about, and the codes
only filter what comes back: a rule that crashes (``TD001``) on any test's source fails
that test loudly, with the rule's traceback, instead of hiding among the results or being
filtered out.
"""

from __future__ import annotations

import re
import textwrap

from torchdoctor.findings import INTERNAL_ERROR_CODE, Finding
from torchdoctor.rules.selection import Selection
from torchdoctor.static import lint_source


def lint_findings(source: str, *codes: str, path: str = "train.py") -> list[Finding]:
    """Findings of ``codes`` (codes or prefixes; all codes when none given) for a dedented
    source. Fails on a crash of any rule."""
    report = lint_source(textwrap.dedent(source), path)
    found = report.findings
    crashes = [f.message for f in found if f.code == INTERNAL_ERROR_CODE]
    assert not crashes, "a lint rule crashed:\n" + "\n".join(
        [*crashes, *report.facts.get("internal_errors", [])]
    )
    if not codes:
        return found
    wanted = Selection.from_options(codes)
    return [f for f in found if wanted.is_enabled(f.code)]


def lint_codes(source: str, *codes: str, path: str = "train.py") -> list[tuple[str, int]]:
    """``(code, line)`` of every finding of ``codes`` (all codes when none given)."""
    return [(f.code, f.location.line or 0) for f in lint_findings(source, *codes, path=path)]


_MARK = re.compile(r"#\s*expect:\s*(TD\d{3}(?:\s*,\s*TD\d{3})*)")


def marked(source: str) -> list[tuple[str, int]]:
    """The ``(code, line)`` pairs a source marks with ``# expect: TD201`` comments."""
    found = []
    for number, line in enumerate(textwrap.dedent(source).splitlines(), start=1):
        match = _MARK.search(line)
        if match:
            found += [(code.strip(), number) for code in match.group(1).split(",")]
    return sorted(found)


def assert_marked(source: str, *codes: str) -> None:
    """Lint ``source`` for ``codes``: the findings must be exactly its ``# expect:`` marks."""
    found = sorted(lint_codes(source, *codes))
    assert found == marked(source), f"expected {marked(source)}, got {found}"
