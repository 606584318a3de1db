"""``[tool.torchdoctor]``, file discovery and excludes, per-file ignores."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.errors import UsageError
from torchdoctor.static import LintConfig, lint
from torchdoctor.static.config import find_config, load_config
from torchdoctor.static.files import collect_files

BUGGY = """\
import torch
def train(model, loader, optimizer):
    for x, y in loader:
        model(x).sum().backward()
        optimizer.step()
"""


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def relative(paths: list[str], root: Path) -> list[str]:
    return sorted(Path(p).resolve().relative_to(root.resolve()).as_posix() for p in paths)


def test_folders_are_walked_and_default_excludes_apply(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            "a.py": "",
            "pkg/b.py": "",
            "pkg/notes.txt": "",
            ".venv/c.py": "",
            "build/d.py": "",
            "pkg/__pycache__/e.py": "",
            # macOS metadata (EnlightenGAN commits an AppleDouble `._options.py`)
            "pkg/._b.py": "",
            "__MACOSX/pkg/b.py": "",
        },
    )
    files = collect_files([tmp_path], LintConfig(root=tmp_path), tmp_path)
    assert relative(files, tmp_path) == ["a.py", "pkg/b.py"]


def test_gitignore_and_extend_exclude(tmp_path: Path) -> None:
    tree(tmp_path, {"keep.py": "", "gen/x.py": "", "legacy/old.py": "", ".gitignore": "gen/\n"})
    config = LintConfig(extend_exclude=("legacy/",), root=tmp_path)
    assert relative(collect_files([tmp_path], config, tmp_path), tmp_path) == ["keep.py"]
    config = LintConfig(respect_gitignore=False, root=tmp_path)
    assert "gen/x.py" in relative(collect_files([tmp_path], config, tmp_path), tmp_path)


def test_an_explicit_file_is_linted_even_when_excluded(tmp_path: Path) -> None:
    tree(tmp_path, {"build/train.py": BUGGY})
    report = lint(tmp_path / "build" / "train.py", config=LintConfig(root=tmp_path))
    assert report.codes() == {"TD201"}


def test_an_explicitly_named_excluded_folder_is_linted(tmp_path: Path) -> None:
    tree(tmp_path, {"site-packages/lib/train.py": BUGGY})
    report = lint(tmp_path / "site-packages" / "lib", config=LintConfig(root=tmp_path))
    assert report.codes() == {"TD201"}


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        lint(tmp_path / "nope.py", config=LintConfig())


def test_pyproject_settings_are_found_and_applied(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            "pyproject.toml": """
[tool.torchdoctor]
ignore = ["TD204"]
extend-exclude = ["skipped/"]
[tool.torchdoctor.per-file-ignores]
"scripts/*.py" = ["TD2"]
""",
            "src/train.py": BUGGY,
            "scripts/try.py": BUGGY,
            "skipped/x.py": BUGGY,
        },
    )
    config = find_config(tmp_path / "src")
    assert config == tmp_path / "pyproject.toml"
    report = lint(tmp_path)
    places = sorted((Path(f.location.path).parent.name, f.code) for f in report.findings)
    assert places == [("src", "TD201")]
    assert report.facts["config"].endswith("pyproject.toml")


def test_command_line_select_overrides_config_ignore_by_longest_prefix(tmp_path: Path) -> None:
    tree(tmp_path, {"pyproject.toml": '[tool.torchdoctor]\nignore = ["TD2"]\n', "train.py": BUGGY})
    assert lint(tmp_path).codes() == set()
    assert lint(tmp_path, select=["TD201"]).codes() == {"TD201"}


def test_pyproject_without_our_table_is_skipped(tmp_path: Path) -> None:
    tree(tmp_path, {"pyproject.toml": "[tool.black]\nline-length = 100\n"})
    assert find_config(tmp_path) is None


@pytest.mark.parametrize(
    "text, words",
    [
        ("[tool.torchdoctor\n", "not valid TOML"),
        ("[tool.torchdoctor]\nselect = 3\n", "select must be a list of strings"),
    ],
)
def test_bad_config_is_a_clear_usage_error(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=words):
        load_config(path)
