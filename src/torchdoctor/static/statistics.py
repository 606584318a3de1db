"""``--statistics``: how many findings each rule produced, most frequent first."""

from __future__ import annotations

from collections import Counter

from torchdoctor.findings import Report
from torchdoctor.rules.registry import RULES

__all__ = ["render_statistics"]


def render_statistics(report: Report) -> str:
    """One line per rule: count, code, ``[*]`` when some of its findings are fixable, name."""
    counts = Counter(f.code for f in report.findings)
    fixable = {f.code for f in report.findings if f.fix is not None}
    width = len(str(max(counts.values(), default=0)))
    lines = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rule = RULES.get(code)
        mark = "[*]" if code in fixable else "   "
        lines.append(f"{count:>{width}}  {code}  {mark} {rule.name if rule else ''}".rstrip())
    return "\n".join(lines) + ("\n" if lines else "")
