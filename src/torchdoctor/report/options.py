"""Options shared by the renderers."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RenderOptions"]


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How to render a report.

    Attributes:
        width: terminal width for the text renderer.
        color: emit ANSI colour codes (text renderer only).
        show_source: include code frames for findings that carry a snippet.
        show_evidence: include the measured evidence under each finding.
        root: paths under this directory are shown relative to it (SARIF, GitHub).
        title: heading of the text report (for example the command that produced it).
        summary_depth: modules of ``check``'s model summary deeper than this are left
            out of the text table and start folded in HTML; ``None``: the default, 2.
    """

    width: int = 100
    color: bool = False
    show_source: bool = True
    show_evidence: bool = True
    root: str | None = None
    title: str | None = None
    summary_depth: int | None = None
