"""Text view of a demo result: an introduction, one report per depth, what merged."""

from __future__ import annotations

from torchdoctor.demo import DemoResult
from torchdoctor.report import RenderOptions, render

__all__ = ["render_demo"]

_INTRO = """\
torchdoctor demo

{script} trains a small image classifier on synthetic data.
Nothing in it crashes and its loss goes down, yet it has several silent bugs.
Here is what each depth of torchdoctor finds in it.
"""


def render_demo(result: DemoResult, *, width: int = 100, color: bool = False) -> str:
    """Render the demo: intro, then each section with the command that reproduces it."""
    parts = [_INTRO.format(script=result.script)]
    for section in result.sections:
        rule = "-" * min(width, 100)
        parts.append(
            f"{rule}\n{section.title} ({section.seconds:.1f} s)\n"
            f"reproduce: {section.command}\n{rule}\n"
        )
        options = RenderOptions(width=width, color=color, root=str(result.script.parent))
        parts.append(render(section.report, "text", options))
    parts.append(_merged_summary(result))
    return "\n".join(parts)


def _merged_summary(result: DemoResult) -> str:
    shared = [f for f in result.combined.findings if len(f.depths) > 1]
    lines = [f"In all: {len(result.combined)} findings from {len(result.sections)} depths."]
    if shared:
        lines.append("Seen by more than one depth (one problem, one entry in the report):")
        for finding in shared:
            depths = ", ".join(d.value for d in finding.depths)
            lines.append(f"  {finding.code} at {finding.location} ({depths})")
    lines.append("Read about any rule with `torchdoctor explain CODE`.")
    return "\n".join(lines) + "\n"
