"""Which files ``lint PATH...`` reads: folders are walked, excludes applied.

A file named on the command line is always linted. Inside folders, only ``*.py`` files are
taken, and every file or folder matching an exclude pattern (gitignore syntax, relative to
the project root; the root ``.gitignore`` too unless turned off) is skipped.

Reading is bounded whatever the tree holds (:func:`read_source`): only regular files are
opened (a FIFO, a device or a link to one is skipped with a TD002 note, never blocks), and a
file over ``max-file-size`` is skipped the same way, never read whole.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

import pathspec

from torchdoctor.errors import UsageError
from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.static.config import DEFAULT_MAX_FILE_SIZE, LintConfig

__all__ = ["collect_files", "exclusion_spec", "per_file_ignored", "read_source"]

_UNPARSABLE = "TD002"


def read_source(path: str, max_bytes: int | None = DEFAULT_MAX_FILE_SIZE) -> bytes | Finding:
    """The bytes of a source file, or a TD002 finding saying why it was not read.

    Only a regular file is opened, without blocking (a FIFO swapped in after the check
    cannot stall the read), and at most ``max_bytes`` are read (``None``: no limit).
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            return _skipped(
                path,
                f"{path} is {_kind(info.st_mode)}, not a regular file; skipped",
                "Exclude it, or lint the file it stands for.",
            )
        if max_bytes is not None and info.st_size > max_bytes:
            return _too_large(path, info.st_size, max_bytes)
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return _skipped(
                    path,
                    f"{path} is not a regular file; skipped",
                    "Exclude it, or lint the file it stands for.",
                )
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except OSError as error:
        from torchdoctor.rules.registry import finding

        return finding(
            _UNPARSABLE,
            f"{path} cannot be read: {error.strerror or error}",
            Location(path=path),
            Depth.LINT,
            fix_hint="Check the path and its permissions.",
        )
    if max_bytes is not None and len(data) > max_bytes:  # grew since the stat
        return _too_large(path, len(data), max_bytes)
    return data


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a special file"


def _too_large(path: str, size: int, limit: int) -> Finding:
    return _skipped(
        path,
        f"{path} is {_mib(size)}, over max-file-size ({_mib(limit)}); skipped",
        "Raise `max-file-size` in [tool.torchdoctor] to lint it, or exclude it (generated code).",
    )


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size} bytes"


def _skipped(path: str, message: str, hint: str) -> Finding:
    from torchdoctor.rules.registry import finding

    return finding(
        _UNPARSABLE, message, Location(path=path), Depth.LINT, fix_hint=hint, severity=Severity.INFO
    )


def exclusion_spec(config: LintConfig, root: Path) -> pathspec.GitIgnoreSpec:
    """The compiled exclude patterns of a configuration."""
    lines = [*config.exclude, *config.extend_exclude]
    gitignore = root / ".gitignore"
    if config.respect_gitignore and gitignore.is_file():
        with contextlib.suppress(OSError):  # unreadable: as if absent
            lines += gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def collect_files(
    paths: Iterable[str | os.PathLike[str]], config: LintConfig, root: Path
) -> list[str]:
    """The files to lint, in a stable order, each spelled as the user would see it.

    Raises:
        UsageError: a path does not exist.
    """
    spec = exclusion_spec(config, root)
    seen: set[str] = set()
    out: list[str] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for found in _walk(path, spec, root):
                _add(found, seen, out)
        elif path.exists():  # a file, or a FIFO or device: reading it says why not
            _add(str(path), seen, out)
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
        dirnames[:] = sorted(d for d in dirnames if not spec.match_file(f"{relative_dir}{d}/"))
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
