"""Files torchdoctor writes: checked before any work starts, written atomically.

Every path given on the command line for an output (``lint -o``, ``check -o``,
``run --report``, ``ckpt --write-remapped``) goes through :func:`checked_output` before the
command does anything: the path is made absolute (a script's ``os.chdir`` cannot move it),
its directory must exist, it must not name one of the command's inputs (a report must
never overwrite the source it reports on), and where the command asks so an existing file
is replaced only with ``--force``. :func:`write_atomic` then writes through a temporary
file in the same directory and a rename, so a reader (or a crash) never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from torchdoctor.errors import UsageError

__all__ = ["checked_output", "target_file", "write_atomic"]

_SOURCE_SUFFIXES = (".py", ".pyi")


def checked_output(
    path: Path | str | None,
    option: str,
    *,
    inputs: Iterable[Path | str | None] = (),
    input_dirs: Iterable[Path] = (),
    refuse_existing: bool = False,
    force: bool = False,
) -> Path | None:
    """``path`` made absolute, or a :class:`UsageError` saying why it cannot be written.

    Args:
        path: the output path as given (``None``: no output, returned as is).
        option: the option's name for the message (``"--output"``).
        inputs: files the command reads; the output may not be one of them.
        input_dirs: folders the command reads Python files from; an existing Python file
            inside one is an input too.
        refuse_existing: an existing file is an error unless ``force``.
        force: replace an existing file (``--force``).
    """
    if path is None:
        return None
    given = str(path)
    absolute = Path(os.path.abspath(os.path.expanduser(given)))
    if absolute.is_dir():
        raise UsageError(f"{option} {given}: is a directory, not a file")
    parent = absolute.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {given}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {given}: the directory {parent} is not writable")
    exists = absolute.exists()
    for source in inputs:
        if source is not None and _same_file(absolute, Path(source)):
            raise UsageError(
                f"{option} {given} names an input ({source}); writing there "
                "would overwrite it: choose another file"
            )
    if exists and absolute.suffix in _SOURCE_SUFFIXES:
        real = absolute.resolve()
        for folder in input_dirs:
            if folder.is_dir() and real.is_relative_to(folder.resolve()):
                raise UsageError(
                    f"{option} {given} names a Python file inside {folder}, "
                    "which is read as input: choose another file"
                )
    if exists and refuse_existing and not force:
        raise UsageError(f"{option} {given} exists; pass --force to replace it")
    return absolute


def target_file(target: str) -> Path | None:
    """The file part of a ``path/to/file.py:factory`` target, when it names a file."""
    path = target.rsplit(":", 1)[0] if ":" in target else target
    candidate = Path(path)
    return candidate if candidate.is_file() else None


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) through a temporary file and a rename.

    A symlink is written through: its target is replaced, the link stays. A device or a
    pipe (``-o /dev/stdout``) is written directly.

    Raises:
        UsageError: the file cannot be written.
    """
    try:
        if path.exists() and not path.is_file():
            with open(path, "w", encoding="utf-8", newline="") as stream:
                stream.write(text)
            return
        _replace(path.resolve() if path.is_symlink() else path, text)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


def _replace(target: Path, text: str) -> None:
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        with contextlib.suppress(OSError):
            mode = target.stat().st_mode & 0o7777 if target.exists() else _default_mode()
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
