"""``[tool.torchdoctor]`` in ``pyproject.toml``: which rules, which files.

Keys (all optional)::

    [tool.torchdoctor]
    select = ["TD"]                 # codes or prefixes; longest match wins
    ignore = ["TD206"]
    exclude = [".venv", "build"]    # replaces the default excludes (gitignore syntax)
    extend-exclude = ["legacy/"]    # adds to them
    respect-gitignore = true        # also skip what the root .gitignore ignores
    max-file-size = "10MB"          # larger files are skipped with a TD002 note
    test-code-as-info = true        # findings in test code are info (except TD405)
    [tool.torchdoctor.per-file-ignores]
    "tests/**" = ["TD2"]

``test-code-as-info`` (on by default; ``lint --no-test-code-as-info`` turns it off for one
run): the warnings and errors of test code (a ``tests/``, ``test/`` or ``testing/``
folder, ``conftest.py``, a ``test_*.py`` that defines tests, a module that imports pytest
or defines a ``TestCase``) are reported as info, each saying why; an evaluation script
named ``test.py`` is not test code. See :mod:`torchdoctor.static.severity_in_tests` for
what counts and why TD405 keeps its severity.

The closest ``pyproject.toml`` above the first linted path that has a
``[tool.torchdoctor]`` table is used; its directory is the project root that patterns are
relative to. Unknown keys, unknown rule codes and values of the wrong type are errors
that name the closest valid key, as a typo would otherwise silently check nothing.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchdoctor.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_MAX_FILE_SIZE",
    "KNOWN_KEYS",
    "LintConfig",
    "find_config",
    "load_config",
    "parse_size",
]

DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024

# Every key of [tool.torchdoctor]; anything else is a typo (or a key of a newer version).
KNOWN_KEYS: tuple[str, ...] = (
    "select",
    "ignore",
    "exclude",
    "extend-exclude",
    "respect-gitignore",
    "per-file-ignores",
    "max-file-size",
    "test-code-as-info",
)

DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".ipynb_checkpoints",
    "node_modules",
    "build",
    "dist",
    "site-packages",
    "__pypackages__",
    # macOS metadata, not source: AppleDouble files (`._train.py`) and zip archives' folder
    "._*",
    "__MACOSX",
)


@dataclass(frozen=True, slots=True)
class LintConfig:
    """Lint settings, from ``pyproject.toml`` or built directly.

    ``LintConfig()`` is the isolated default: every rule, the default excludes, no file
    read. Patterns are gitignore-style and relative to ``root``.
    """

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    respect_gitignore: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    test_code_as_info: bool = True
    root: Path | None = None
    source: Path | None = field(default=None, compare=False)


def find_config(start: Path) -> Path | None:
    """The closest ``pyproject.toml`` at or above ``start`` with ``[tool.torchdoctor]``."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and "torchdoctor" in _table(_read_toml(path)).get("tool", {}):
            return path
    return None


def load_config(path: Path) -> LintConfig:
    """Read the ``[tool.torchdoctor]`` table of a ``pyproject.toml`` (or the top level of
    any other TOML file).

    Raises:
        UsageError: the file cannot be read, is not TOML, or a key has the wrong type.
    """
    data = _read_toml(path)
    table = (
        _table(data.get("tool", {})).get("torchdoctor") if path.name == "pyproject.toml" else data
    )
    table = _table(table or {})
    _check_keys(table, path)
    per_file_value = table.get("per-file-ignores", {})
    if not isinstance(per_file_value, Mapping):
        raise UsageError(
            f"{path}: [tool.torchdoctor] per-file-ignores must be a table of "
            "patterns to lists of codes"
        )
    per_file = _table(per_file_value)
    from torchdoctor.rules.selection import check_selectors

    select, ignore = _strings(table, "select", path), _strings(table, "ignore", path)
    check_selectors(select, "select", str(path))
    check_selectors(ignore, "ignore", str(path))
    for pattern in per_file:
        check_selectors(
            _strings(per_file, pattern, path), f"per-file-ignores {pattern!r}", str(path)
        )
    respect = _flag(table, "respect-gitignore", path)
    test_code_as_info = _flag(table, "test-code-as-info", path)
    size = table.get("max-file-size", DEFAULT_MAX_FILE_SIZE)
    try:
        max_file_size = parse_size(size)
    except ValueError as error:
        raise UsageError(f"{path}: [tool.torchdoctor] max-file-size: {error}") from None
    return LintConfig(
        select=select,
        ignore=ignore,
        exclude=_strings(table, "exclude", path) if "exclude" in table else DEFAULT_EXCLUDE,
        extend_exclude=_strings(table, "extend-exclude", path),
        per_file_ignores=tuple(
            (pattern, _strings(per_file, pattern, path)) for pattern in per_file
        ),
        respect_gitignore=respect,
        max_file_size=max_file_size,
        test_code_as_info=test_code_as_info,
        root=path.resolve().parent,
        source=path,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise UsageError(f"cannot read config {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path} is not valid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise UsageError(
            f"{path} is not UTF-8 text (byte {error.start}): TOML files must be UTF-8"
        ) from None
    except RecursionError:
        raise UsageError(f"{path} is nested too deeply to read") from None


def _check_keys(table: Mapping[str, Any], path: Path) -> None:
    for key in table:
        if key in KNOWN_KEYS:
            continue
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.5)
        hint = (
            f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(KNOWN_KEYS)}"
        )
        raise UsageError(f"{path}: unknown key {key!r} in [tool.torchdoctor]{hint}")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value: object) -> int:
    """Bytes from ``10485760``, ``"10MB"``, ``"512 KiB"`` (units of 1024).

    Raises:
        ValueError: not a positive size.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f'expected a size such as 10485760 or "10MB", not {value!r}')
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(value)
        if match is None:
            raise ValueError(f'expected a size such as "10MB" or "512KB", not {value!r}')
        size = int(float(match.group(1)) * _UNITS[(match.group(2) or "")[:1].lower()])
    if size <= 0:
        raise ValueError(f"the size must be positive, not {value!r}")
    return size


def _table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _flag(table: Mapping[str, Any], key: str, path: Path) -> bool:
    """A true/false key, true when absent."""
    value = table.get(key, True)
    if not isinstance(value, bool):
        raise UsageError(f"{path}: [tool.torchdoctor] {key} must be true or false, not {value!r}")
    return value


def _strings(table: Mapping[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = table.get(key, ())
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: [tool.torchdoctor] {key} must be a list of strings")
    return tuple(value)
