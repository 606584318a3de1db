"""The HTML report in a real browser: it loads nothing from the network, logs no console
error, and its plots are drawn (coloured pixels in every plot area of a screenshot).

Needs Debian's ``chromium`` (``.ci/run`` installs it); skipped cleanly without it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.unit.report.test_html import run_report
from torchdoctor.findings import Report
from torchdoctor.report import RenderOptions, render

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _screenshots_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "torchdoctor_screenshots", ROOT / "scripts" / "screenshots.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


shots = _screenshots_module()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = shots.find_chromium()
    if executable is None:
        pytest.skip("chromium is not installed (.ci/run installs it with apt-get)")
    with shots.Chromium(executable, timeout=120) as chromium:
        yield chromium


def _check_report() -> Report:
    report = Report(
        tool_version="0.1.0",
        command="check",
        facts={
            "seconds": 1.2,
            "model": "Net",
            "layer_grad_norms": {f"layers.{i}.weight": 10.0 ** (-i / 2) for i in range(8)},
        },
    )
    report.series["overfit_loss"] = [2.3, 1.9, 1.4, 1.0, 0.7, 0.5, 0.4]
    return report


@pytest.mark.parametrize("make", [run_report, _check_report], ids=["run", "check"])
def test_page_loads_offline_without_errors_and_draws_its_plots(
    browser: Any, tmp_path: Path, make: Any
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render(make(), "html", RenderOptions(title="torchdoctor")), encoding="utf-8")
    load = browser.load(page)
    assert load.requests == [page.resolve().as_uri()]  # the page itself, nothing else
    assert load.errors == []
    boxes = browser.boxes("svg.plot")
    assert len(boxes) == page.read_text(encoding="utf-8").count('<svg class="plot"') >= 2
    for box in boxes:
        assert box["width"] > 300 and box["height"] > 100
        inked, coloured = shots.ink_fractions(browser.screenshot(box))
        assert inked > 0.01, box  # axes, labels and lines
        assert coloured > 0.002, box  # the plotted lines and bars themselves


def test_a_blank_plot_area_is_told_apart(browser: Any, tmp_path: Path) -> None:
    """The pixel count can fail: a report whose only series has no finite value draws
    axes-free "no finite values" text and no coloured pixel."""
    report = Report(command="run", facts={"steps": 3})
    report.series["loss"] = [float("nan")] * 3
    page = tmp_path / "blank.html"
    page.write_text(render(report, "html", RenderOptions()), encoding="utf-8")
    assert browser.load(page).errors == []
    (box,) = browser.boxes("svg.plot")
    assert shots.ink_fractions(browser.screenshot(box))[1] == 0.0
