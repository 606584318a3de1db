"""lint reads regular files only and boundedly; --fix keeps CRLF and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchdoctor.findings import Severity
from torchdoctor.static import LintConfig, fix, lint
from torchdoctor.static.files import read_source

LOOP = """\
import torch
def train(model, loader, optimizer, criterion):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
"""

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


@needs_fifo
def test_a_fifo_in_the_tree_is_a_note_and_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text("x = 1\n", encoding="utf-8")
    report = lint(tmp_path, config=LintConfig())
    notes = report.by_code("TD002")
    assert len(notes) == 1 and "FIFO" in notes[0].message
    assert notes[0].severity is Severity.INFO
    assert report.facts["files"] == 2


@needs_fifo
def test_a_fifo_named_on_the_command_line_is_a_note(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    report = lint(tmp_path / "pipe.py", config=LintConfig())
    assert [f.code for f in report.findings] == ["TD002"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_link_to_a_device_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    report = lint(tmp_path, config=LintConfig())
    assert "a device" in report.by_code("TD002")[0].message


def test_a_file_over_the_size_cap_is_skipped_with_a_note(tmp_path: Path) -> None:
    big = tmp_path / "generated.py"
    big.write_text("x = 1\n" * 1000, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdoctor]\nmax-file-size = "4KB"\n', encoding="utf-8"
    )
    notes = lint(big).by_code("TD002")
    assert len(notes) == 1 and "max-file-size" in notes[0].message
    assert lint(big, config=LintConfig()).by_code("TD002") == []  # default cap: 10 MiB
    assert isinstance(read_source(str(big), 6000), bytes)


def test_fix_keeps_crlf_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(LOOP.replace("\n", "\r\n").encode())
    outcome = fix(path, config=LintConfig(), select=["TD2"], unsafe=True)
    assert outcome.applied
    data = path.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n") == LOOP.count("\n")
    assert b"zero_grad" in data


def test_fix_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text(LOOP, encoding="utf-8")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    outcome = fix(link, config=LintConfig(), select=["TD2"], unsafe=True)
    assert outcome.applied and link.is_symlink()
    assert real.read_text(encoding="utf-8") != LOOP
