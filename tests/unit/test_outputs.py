"""Output paths: made absolute, checked before any work, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchdoctor.errors import UsageError
from torchdoctor.outputs import checked_output, target_file, write_atomic


def test_a_fresh_file_in_an_existing_directory_is_accepted_and_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = checked_output(Path("report.json"), "--output")
    assert path == tmp_path / "report.json" and path.is_absolute()
    assert checked_output(None, "--output") is None


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        checked_output(tmp_path / "nope" / "r.json", "--report")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a directory"):
        checked_output(tmp_path, "--output")


def test_an_output_naming_an_input_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "t.py"
    source.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match="names an input"):
        checked_output(source, "--output", inputs=(source,))
    link = tmp_path / "link.py"
    link.symlink_to(source)
    with pytest.raises(UsageError, match="names an input"):
        checked_output(link, "--output", inputs=(source,))


def test_an_existing_python_file_inside_an_input_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match="inside"):
        checked_output(tmp_path / "t.py", "-o", input_dirs=(tmp_path,))
    # a report file there is fine: it is not read
    assert checked_output(tmp_path / "report.txt", "-o", input_dirs=(tmp_path,))


def test_an_existing_file_needs_force_only_where_asked(tmp_path: Path) -> None:
    existing = tmp_path / "out.pt"
    existing.write_bytes(b"x")
    assert checked_output(existing, "-o") == existing
    with pytest.raises(UsageError, match="--force"):
        checked_output(existing, "--write-remapped", refuse_existing=True)
    assert checked_output(existing, "--write-remapped", refuse_existing=True, force=True)


def test_target_file_is_the_path_part_of_a_factory_target(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_text("", encoding="utf-8")
    assert target_file(f"{source}:make") == source
    assert target_file("package.module:make") is None


def test_write_atomic_replaces_the_content_and_keeps_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old", encoding="utf-8")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(link, "new\r\n")
    assert link.is_symlink() and real.read_bytes() == b"new\r\n"
    assert real.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_write_atomic_writes_a_device_directly_and_never_replaces_it() -> None:
    import stat

    write_atomic(Path(os.devnull), "report\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_write_atomic_turns_os_errors_into_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write"):
        write_atomic(tmp_path / "missing" / "r.json", "x")
