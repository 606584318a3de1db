"""Whole-output snapshots of the text, concise, JSON and JUnit renderers on one rich report.

A change to any of these outputs shows up as a reviewable diff of the files under
``tests/snapshots/__snapshots__/test_snapshots/``; update them with
``python -m pytest tests/unit/report/test_snapshots.py --snapshot-update`` after reading it.
"""

from __future__ import annotations

import pytest

from tests.snapshots.reports import ROOT, TextSnapshot, rich_report
from torchdoctor.report import RenderOptions, render


@pytest.mark.parametrize("fmt", ["text", "concise", "json", "junit"])
def test_rendered_report_matches_its_snapshot(fmt: str, snapshot) -> None:
    options = RenderOptions(width=100, root=ROOT, title="torchdoctor lint")
    assert render(rich_report(), fmt, options) == snapshot(extension_class=TextSnapshot)
