"""Text views of the catalogue for ``torchdoctor rules`` and ``torchdoctor explain``."""

from __future__ import annotations

import json

from torchdoctor.errors import UsageError
from torchdoctor.findings import Depth
from torchdoctor.rules.docs import load_doc
from torchdoctor.rules.registry import RULES, Rule
from torchdoctor.rules.selection import Selection

__all__ = ["explain", "find_rule", "render_rules_json", "render_rules_text"]


def _selected(selection: Selection) -> list[Rule]:
    return [r for r in RULES.values() if selection.is_enabled(r.code) and not r.removed]


def render_rules_text(selection: Selection) -> str:
    """One line per rule, grouped by topic."""
    lines: list[str] = []
    topic = None
    for rule in _selected(selection):
        if rule.topic is not topic:
            topic = rule.topic
            lines += ["", topic.title] if lines else [topic.title]
        depths = ",".join(d.value for d in Depth if d in rule.depths)
        lines.append(
            f"  {rule.code}  {rule.name:<40} {rule.severity.value:<8} {depths:<18} {rule.summary}"
        )
    return "\n".join(lines) + "\n"


def render_rules_json(selection: Selection) -> str:
    """The catalogue as JSON, one object per rule."""
    rows = [
        {
            "code": r.code,
            "name": r.name,
            "severity": r.severity.value,
            "topic": r.topic.title,
            "depths": [d.value for d in Depth if d in r.depths],
            "summary": r.summary,
        }
        for r in _selected(selection)
    ]
    return json.dumps(rows, indent=2) + "\n"


def find_rule(code_or_name: str) -> Rule:
    """Look a rule up by code (``TD201``, any case) or by name (``grads-never-cleared``).

    Raises:
        UsageError: no such rule; the message suggests close names.
    """
    key = code_or_name.strip()
    rule = RULES.get(key.upper())
    if rule is None:
        rule = next((r for r in RULES.values() if r.name == key.lower()), None)
    if rule is None:
        import difflib

        names = [r.name for r in RULES.values()] + list(RULES)
        close = difflib.get_close_matches(key, names, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UsageError(f"no rule {code_or_name!r}.{hint} `torchdoctor rules` lists them.")
    return rule


def explain(code_or_name: str) -> str:
    """The full Markdown documentation of one rule."""
    return load_doc(find_rule(code_or_name).code).to_markdown()
