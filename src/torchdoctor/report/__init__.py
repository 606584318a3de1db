"""Renderers: pure functions from a :class:`~torchdoctor.findings.Report` to text.

Each format lives in its own module and exposes ``render_<format>(report, options)``.
Renderers do no I/O, never import torch and never read the clock, so their output is
deterministic and snapshot-testable.
"""

from __future__ import annotations

from collections.abc import Callable

from torchdoctor.errors import UnknownFormatError
from torchdoctor.findings import Report
from torchdoctor.report.options import RenderOptions

__all__ = ["FORMATS", "RenderOptions", "UnknownFormatError", "render"]

Renderer = Callable[[Report, RenderOptions], str]

# Format name -> "module:function". Imported on use so that `import torchdoctor.report`
# stays cheap and a format's dependencies load only when it is asked for.
FORMATS: dict[str, str] = {
    "text": "torchdoctor.report.text:render_text",
    "concise": "torchdoctor.report.concise:render_concise",
    "json": "torchdoctor.report.json:render_json",
    "sarif": "torchdoctor.report.sarif:render_sarif",
    "github": "torchdoctor.report.github:render_github",
    "junit": "torchdoctor.report.junit:render_junit",
    "html": "torchdoctor.report.html:render_html",
}


def render(report: Report, format: str = "text", options: RenderOptions | None = None) -> str:
    """Render ``report`` in ``format`` (one of :data:`FORMATS`)."""
    import importlib

    try:
        module_name, function_name = FORMATS[format].split(":")
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise UnknownFormatError(f"unknown format {format!r}; choose one of: {known}") from None
    renderer: Renderer = getattr(importlib.import_module(module_name), function_name)
    return renderer(report, options or RenderOptions())
