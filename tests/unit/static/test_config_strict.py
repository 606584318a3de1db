"""Strict configuration: unknown codes, keys and value types are errors with a suggestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.errors import UsageError
from torchdoctor.rules.selection import Selection
from torchdoctor.static.config import DEFAULT_MAX_FILE_SIZE, load_config, parse_size


def config(tmp_path: Path, body: str | bytes) -> Path:
    path = tmp_path / "pyproject.toml"
    data = body if isinstance(body, bytes) else f"[tool.torchdoctor]\n{body}\n".encode()
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("value", "suggestion"),
    [
        ("TD2O1", "TD201"),
        ("XYZ", "torchdoctor rules"),
        ("TD2010", "TD201"),
    ],
)
def test_an_unknown_selector_is_an_error_naming_the_closest_code(
    value: str, suggestion: str
) -> None:
    with pytest.raises(UsageError, match=suggestion):
        Selection.from_options([value])
    with pytest.raises(UsageError, match=value):
        Selection.from_options(None, [value])


@pytest.mark.parametrize("value", ["TD", "td2", "TD201", "TD2,TD3", "TDX1", "TD9"])
def test_codes_prefixes_and_custom_codes_are_accepted(value: str) -> None:
    assert Selection.from_options([value]).select


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('selcet = ["TD2"]', "did you mean 'select'"),
        ('respect-gitignore = "no"', "respect-gitignore must be true or false"),
        ('select = ["XYZ"]', "select 'XYZ' matches no rule code"),
        ('ignore = ["TD2O6"]', "TD206"),
        ("select = 3", "select must be a list of strings"),
        ('per-file-ignores = ["x"]', "per-file-ignores must be a table"),
        ('[tool.torchdoctor.per-file-ignores]\n"tests/**" = ["TDQ"]', "per-file-ignores"),
        ('max-file-size = "lots"', "max-file-size"),
        ("max-file-size = 0", "max-file-size"),
        ("max-file-size = true", "max-file-size"),
    ],
)
def test_a_bad_config_is_an_error_naming_the_file(tmp_path: Path, body: str, message: str) -> None:
    path = config(tmp_path, body)
    with pytest.raises(UsageError, match=message) as raised:
        load_config(path)
    assert str(path) in str(raised.value)


def test_a_good_config_still_loads(tmp_path: Path) -> None:
    loaded = load_config(
        config(
            tmp_path,
            'select = ["TD2"]\nignore = ["TD206"]\n'
            'respect-gitignore = false\nmax-file-size = "2MB"',
        )
    )
    assert loaded.select == ("TD2",) and loaded.respect_gitignore is False
    assert loaded.max_file_size == 2 * 1024 * 1024
    assert load_config(config(tmp_path, "")).max_file_size == DEFAULT_MAX_FILE_SIZE


def test_a_non_utf8_pyproject_is_a_usage_error(tmp_path: Path) -> None:
    path = config(tmp_path, b'[tool.torchdoctor]\nselect = ["TD2"] # \xff\xfe\n')
    with pytest.raises(UsageError, match="not UTF-8"):
        load_config(path)


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (1000, 1000),
        ("10MB", 10 * 1024**2),
        ("512 KiB", 512 * 1024),
        ("1g", 1024**3),
        ("42", 42),
    ],
)
def test_sizes_parse(value: object, size: int) -> None:
    assert parse_size(value) == size
