"""Which files ``lint PATH...`` reads: folders are walked, excludes applied.

A file named on the command line is always linted. Inside folders, only ``*.py`` files are
taken, and every file or folder matching an exclude pattern (gitignore syntax, relative to
the project root; the root ``.gitignore`` too unless turned off) is skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

import pathspec

from torchdoctor.errors import UsageError
from torchdoctor.static.config import LintConfig

__all__ = ["collect_files", "exclusion_spec", "per_file_ignored"]


def exclusion_spec(config: LintConfig, root: Path) -> pathspec.GitIgnoreSpec:
    """The compiled exclude patterns of a configuration."""
    lines = [*config.exclude, *config.extend_exclude]
    gitignore = root / ".gitignore"
    if config.respect_gitignore and gitignore.is_file():
        with contextlib.suppress(OSError):  # unreadable: as if absent
            lines += gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def collect_files(paths: Iterable[str | os.PathLike[str]], config: LintConfig,
                  root: Path) -> list[str]:
    """The files to lint, in a stable order, each spelled as the user would see it.

    Raises:
        UsageError: a path does not exist.
    """
    spec = exclusion_spec(config, root)
    seen: set[str] = set()
    out: list[str] = []
    for given in paths:
        path = Path(given)
        if path.is_file():
            _add(str(path), seen, out)
        elif path.is_dir():
            for found in _walk(path, spec, root):
                _add(found, seen, out)
        else:
            raise UsageError(f"no such file or directory: {given}")
    return out


def _add(path: str, seen: set[str], out: list[str]) -> None:
    key = os.path.normcase(os.path.abspath(path))
    if key not in seen:
        seen.add(key)
        out.append(path)


def _walk(top: Path, spec: pathspec.GitIgnoreSpec, root: Path) -> list[str]:
    found: list[str] = []
    top_abs = top.resolve()
    if _explicitly_excluded(top_abs, spec, root):
        # The user named an excluded folder (``lint .venv/.../torch``): lint it anyway,
        # matching patterns below it only.
        root = top_abs
    for directory, dirnames, filenames in os.walk(top, followlinks=False):
        base = Path(directory)
        relative_dir = _relative(base, top, top_abs, root)
        dirnames[:] = sorted(d for d in dirnames
                             if not spec.match_file(f"{relative_dir}{d}/"))
        for name in sorted(filenames):
            if name.endswith(".py") and not spec.match_file(f"{relative_dir}{name}"):
                found.append(os.path.normpath(os.path.join(directory, name)))
    return found


def _explicitly_excluded(top_abs: Path, spec: pathspec.GitIgnoreSpec, root: Path) -> bool:
    try:
        parts = top_abs.relative_to(root).parts
    except ValueError:
        return False
    return any(spec.match_file("/".join(parts[:i]) + "/") for i in range(1, len(parts) + 1))


def _relative(directory: Path, top: Path, top_abs: Path, root: Path) -> str:
    """``directory`` relative to the project root (or to ``top`` outside it), ``/``-ended."""
    absolute = top_abs / directory.relative_to(top)
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        relative = absolute.relative_to(top_abs)
    text = relative.as_posix()
    return "" if text == "." else text + "/"


def per_file_ignored(path: str, config: LintConfig, root: Path) -> tuple[str, ...]:
    """Code prefixes ``per-file-ignores`` switch off for ``path``."""
    if not config.per_file_ignores:
        return ()
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(root).as_posix()
    except ValueError:
        relative = Path(path).as_posix()
    ignored: list[str] = []
    for pattern, codes in config.per_file_ignores:
        if pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(relative):
            ignored.extend(code.upper() for code in codes)
    return tuple(ignored)
