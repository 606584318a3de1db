"""Rule documentation: one Markdown file per rule in ``rules/docs/TDxxx.md``.

Each file holds fixed ``## `` sections (:data:`SECTIONS`). The title and the "Detected by"
section are generated from the catalogue, so the depths a doc claims can never drift from
the detectors that exist. ``torchdoctor explain`` and every report renderer use this text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from torchdoctor.findings import Depth
from torchdoctor.rules.registry import Rule, get_rule

__all__ = ["SECTIONS", "MissingDocError", "RuleDoc", "load_doc"]

SECTIONS: tuple[str, ...] = (
    "What it finds",
    "Why it matters",
    "Example",
    "Fix",
    "Known false negatives",
)

_HEADING = re.compile(r"^## (.+?)\s*$", re.MULTILINE)


class MissingDocError(LookupError):
    """A rule has no doc file, or the file lacks a required section."""


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """A rule's documentation, split into its sections."""

    rule: Rule
    sections: dict[str, str]

    def section(self, heading: str) -> str:
        """The body of one section, without its heading."""
        return self.sections.get(heading, "")

    @property
    def detected_by(self) -> str:
        """Generated "Detected by" text: the depths from the catalogue."""
        return ", ".join(f"`{d.value}`" for d in sorted(self.rule.depths, key=_depth_order))

    def to_markdown(self) -> str:
        """The whole doc, title and generated sections included."""
        rule = self.rule
        parts = [f"# {rule.code} {rule.name}", "", f"{rule.summary}.", ""]
        parts.append(f"Default severity: **{rule.severity.value}**. Topic: {rule.topic.title}.")
        parts.append("")
        for heading in SECTIONS:
            parts += [f"## {heading}", "", self.section(heading), ""]
            if heading == "Fix":
                parts += ["## Detected by", "", self.detected_by, ""]
        return "\n".join(parts).rstrip() + "\n"


def _depth_order(depth: Depth) -> int:
    return list(Depth).index(depth)


def load_doc(code: str) -> RuleDoc:
    """Load and split the doc of ``code``.

    Raises:
        UnknownRuleError: not a catalogued code.
        MissingDocError: the doc file or one of its sections is missing.
    """
    rule = get_rule(code)
    try:
        text = (
            resources.files("torchdoctor.rules")
            .joinpath(f"docs/{rule.code}.md")
            .read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        raise MissingDocError(f"{rule.code} has no documentation file") from None
    sections = _split_sections(text)
    missing = [heading for heading in SECTIONS if not sections.get(heading)]
    if missing:
        raise MissingDocError(f"{rule.code} doc lacks sections: {', '.join(missing)}")
    return RuleDoc(rule, sections)


def _split_sections(text: str) -> dict[str, str]:
    matches = list(_HEADING.finditer(text))
    sections: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        sections[match.group(1)] = text[match.end() : end].strip()
    return sections
