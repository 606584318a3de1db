"""``[tool.torchdoctor]`` in ``pyproject.toml``: which rules, which files.

Keys (all optional)::

    [tool.torchdoctor]
    select = ["TD"]                 # codes or prefixes; longest match wins
    ignore = ["TD206"]
    exclude = [".venv", "build"]    # replaces the default excludes (gitignore syntax)
    extend-exclude = ["legacy/"]    # adds to them
    respect-gitignore = true        # also skip what the root .gitignore ignores
    [tool.torchdoctor.per-file-ignores]
    "tests/**" = ["TD2"]

The closest ``pyproject.toml`` above the first linted path that has a
``[tool.torchdoctor]`` table is used; its directory is the project root that patterns are
relative to. Keys other depths read may live in the same table and are ignored here.
"""

from __future__ import annotations

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

__all__ = ["DEFAULT_EXCLUDE", "LintConfig", "find_config", "load_config"]

DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg-info",
    "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".ipynb_checkpoints",
    "node_modules", "build", "dist", "site-packages", "__pypackages__",
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
    table = _table(data.get("tool", {})).get("torchdoctor") if path.name == "pyproject.toml" \
        else data
    table = _table(table or {})
    per_file = _table(table.get("per-file-ignores", {}))
    return LintConfig(
        select=_strings(table, "select", path),
        ignore=_strings(table, "ignore", path),
        exclude=_strings(table, "exclude", path) if "exclude" in table else DEFAULT_EXCLUDE,
        extend_exclude=_strings(table, "extend-exclude", path),
        per_file_ignores=tuple((pattern, _strings(per_file, pattern, path))
                               for pattern in per_file),
        respect_gitignore=bool(table.get("respect-gitignore", True)),
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


def _table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(table: Mapping[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = table.get(key, ())
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: [tool.torchdoctor] {key} must be a list of strings")
    return tuple(value)
