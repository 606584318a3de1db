"""``--baseline``: known findings are dropped, robustly to line shifts; new ones stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.errors import UsageError
from torchdoctor.report import render
from torchdoctor.static import LintConfig, lint

LOOP = """\
import torch
def train(model, loader, optimizer):
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()
"""


def write_baseline(path: Path, baseline: Path) -> None:
    baseline.write_text(render(lint(path, config=LintConfig()), "json"), encoding="utf-8")


def test_known_findings_survive_lines_moving(tmp_path: Path) -> None:
    source, baseline = tmp_path / "train.py", tmp_path / "baseline.json"
    source.write_text(LOOP, encoding="utf-8")
    write_baseline(source, baseline)
    source.write_text('"""Docs added above."""\n\n\n' + LOOP, encoding="utf-8")
    report = lint(source, config=LintConfig(), baseline=baseline)
    assert report.findings == [] and report.facts["baseline_known"] == 1


def test_a_new_copy_of_a_known_problem_is_new(tmp_path: Path) -> None:
    source, baseline = tmp_path / "train.py", tmp_path / "baseline.json"
    source.write_text(LOOP, encoding="utf-8")
    write_baseline(source, baseline)
    source.write_text(LOOP + LOOP.replace("def train", "def train_again"), encoding="utf-8")
    report = lint(source, config=LintConfig(), baseline=baseline)
    assert [(f.code, f.location.line) for f in report.findings] == [("TD201", 10)]


def test_a_changed_line_is_a_new_finding(tmp_path: Path) -> None:
    source, baseline = tmp_path / "train.py", tmp_path / "baseline.json"
    source.write_text(LOOP, encoding="utf-8")
    write_baseline(source, baseline)
    source.write_text(
        LOOP.replace("optimizer.step()", "optimizer.step()  # tuned"), encoding="utf-8"
    )
    assert lint(source, config=LintConfig(), baseline=baseline).codes() == {"TD201"}


def test_a_bad_baseline_is_a_usage_error(tmp_path: Path) -> None:
    source, baseline = tmp_path / "train.py", tmp_path / "baseline.json"
    source.write_text(LOOP, encoding="utf-8")
    baseline.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(UsageError, match="not a torchdoctor JSON report"):
        lint(source, config=LintConfig(), baseline=baseline)
    with pytest.raises(UsageError, match="cannot read baseline"):
        lint(source, config=LintConfig(), baseline=tmp_path / "missing.json")
