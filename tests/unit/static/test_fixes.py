"""Fixes: edits applied whole, overlaps deferred, idempotent, encoding kept, never written
unless asked."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.findings import Applicability, Edit, Fix
from torchdoctor.static import LintConfig, fix
from torchdoctor.static.fixes import apply_fixes

FORWARD = """\
from torch import nn
model = nn.Linear(2, 2)
out = model.forward(x)  # called directly
"""


def test_edits_replace_insert_and_delete_by_position() -> None:
    text = "a = 1\nb = 2\nc = 3\n"
    fixes = [
        Fix("replace", (Edit(1, 4, 1, 5, "10"),)),
        Fix("insert", (Edit(2, 0, 2, 0, "# note\n"),)),
        Fix("delete", (Edit(3, 0, 4, 0, ""),)),
    ]
    assert apply_fixes(text, fixes) == ("a = 10\n# note\nb = 2\n", 3)


def test_overlapping_fixes_apply_the_first_and_skip_the_rest_whole() -> None:
    text = "value = compute(x)\n"
    later = Fix("later", (Edit(1, 8, 1, 18, "f(x)"),))
    earlier = Fix("earlier", (Edit(1, 0, 1, 5, "v"), Edit(1, 10, 1, 12, "Z")))
    fixed, applied = apply_fixes(text, [later, earlier])
    assert applied == 1  # `later` overlaps the second edit of `earlier`: skipped whole
    assert fixed == "v = coZute(x)\n"


def test_identical_fixes_apply_once() -> None:
    same = Fix("x", (Edit(1, 0, 1, 0, "# top\n"),))
    assert apply_fixes("x = 1\n", [same, same]) == ("# top\nx = 1\n", 1)


def test_crlf_and_non_ascii_columns() -> None:
    text = "s = 'é'\r\nmodel.forward(x)\r\n"
    fixed, _ = apply_fixes(text, [Fix("f", (Edit(2, 5, 2, 13, ""),))])
    assert fixed == "s = 'é'\r\nmodel(x)\r\n"


def test_unsafe_fixes_need_opting_in_and_nothing_is_written_for_diff(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(FORWARD, encoding="utf-8")
    safe_only = fix(path, config=LintConfig(), select=["TD206"])
    assert safe_only.applied == 0 and path.read_text(encoding="utf-8") == FORWARD
    preview = fix(path, unsafe=True, write=False, config=LintConfig(), select=["TD206"])
    assert preview.applied == 1 and path.read_text(encoding="utf-8") == FORWARD
    assert "-out = model.forward(x)  # called directly" in preview.diff()
    assert "+out = model(x)  # called directly" in preview.diff()


def test_fix_writes_in_place_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    data = (
        ("# -*- coding: latin-1 -*-\n" + FORWARD.replace("directly", "directly é"))
        .replace("\n", "\r\n")
        .encode("latin-1")
    )
    path.write_bytes(data)
    first = fix(path, unsafe=True, config=LintConfig(), select=["TD206"])
    assert first.applied == 1 and first.report.by_code("TD206") == []
    written = path.read_bytes()
    assert written == data.replace(b"model.forward(x)", b"model(x)")
    second = fix(path, unsafe=True, config=LintConfig(), select=["TD206"])
    assert second.applied == 0 and path.read_bytes() == written


def test_fixes_of_several_rules_in_one_loop_converge(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(
        """\
import torch
def train(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        loss = criterion(model.forward(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        total += loss
    return total
""",
        encoding="utf-8",
    )
    outcome = fix(path, unsafe=True, config=LintConfig(), select=["TD2"])
    assert outcome.report.codes() == set()
    assert (
        path.read_text(encoding="utf-8")
        == """\
import torch
def train(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
"""
    )


def test_fix_records_are_marked_unsafe_when_behaviour_changes() -> None:
    from torchdoctor.static import lint_source

    (found,) = lint_source(FORWARD, select=["TD206"])
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
