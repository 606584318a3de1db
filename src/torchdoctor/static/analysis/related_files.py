"""The project's files that belong to the same program as the file being linted.

A repository of separate examples is not one program: a file's program is its folder and
the folders above and below it (its *folder line*). Rules that ask whether another part
of the program does something (loads a pickled model back, strips the ``module.``
prefix, initialises a parameter) read those files' text, once per question and folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TypeVar

from torchdoctor.static.context import FileContext
from torchdoctor.static.files import read_source

__all__ = [
    "first_in_imported_files",
    "first_in_related_files",
    "imported_sources",
    "program_sources",
    "related_sources",
]

T = TypeVar("T")


def related_sources(paths: list[str], folder: str) -> Iterator[tuple[str, bytes]]:
    """``(path, text)`` of each file along ``folder``'s line, in path order."""
    for path in sorted(paths):
        if not _related(os.path.dirname(path), folder):
            continue
        data = read_source(path)
        if isinstance(data, bytes):
            yield path, data


def first_in_related_files(
    ctx: FileContext, question: str, answer: Callable[[str, bytes], T | None]
) -> T | None:
    """The first non-``None`` ``answer(path, text)`` over the files along the linted
    file's folder line, remembered per ``question`` and folder for the whole project."""
    project = ctx.project
    folder = os.path.dirname(os.path.abspath(ctx.path))

    def search() -> T | None:
        for path, data in related_sources(project.paths(), folder):
            found = answer(path, data)
            if found is not None:
                return found
        return None

    return project.remember(f"{question}:{folder}", search)


def first_in_imported_files(ctx: FileContext, answer: Callable[[str, bytes], T | None]) -> T | None:
    """The first non-``None`` ``answer(path, text)`` over the project's modules the linted
    file imports (:func:`imported_sources`)."""
    for path, data in imported_sources(ctx):
        found = answer(path, data)
        if found is not None:
            return found
    return None


def imported_sources(ctx: FileContext) -> Iterator[tuple[str, bytes]]:
    """``(path, text)`` of each of the project's modules the linted file imports (``import
    utils``, ``from utils.model_utils import load_checkpoint``), a package's modules with
    it, wherever they sit: a sibling folder is another program unless it is imported."""
    imported: set[str] = set()
    for qualified in ctx.imports.values():
        parts = qualified.split(".")
        imported.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    project = ctx.project
    own = os.path.abspath(ctx.path)
    for path in sorted(project.paths()):
        facts = project.facts_for(path)
        if facts is None or path == own:
            continue
        name = facts.name
        if (
            name not in imported
            and not any(name.startswith(m + ".") for m in imported)
            and not _imported_by_path(path, imported)
        ):
            continue  # a package imported whole brings its modules (`import utils`)
        data = read_source(path)
        if isinstance(data, bytes):
            yield path, data


def _imported_by_path(path: str, imported: set[str]) -> bool:
    """The file's path ends with an imported dotted name: ``hybrik/utils/env.py`` for
    ``hybrik.utils.env`` where ``hybrik`` is a namespace package (no ``__init__.py``), so
    the project names the module ``utils.env``."""
    stem = path[: -len("/__init__.py")] if path.endswith("/__init__.py") else path[:-3]
    parts = stem.replace(os.sep, "/").split("/")
    return any(
        len(dotted.split(".")) > 1 and parts[-len(dotted.split(".")) :] == dotted.split(".")
        for dotted in imported
    )


def _related(one: str, other: str) -> bool:
    """One folder is the other or lies inside it."""
    return one == other or one.startswith(other + os.sep) or other.startswith(one + os.sep)


def program_sources(ctx: FileContext) -> Iterator[tuple[str, bytes]]:
    """``(path, text)`` of every file of the linted file's program: the files along its
    folder line, then the project modules it imports, each once."""
    seen: set[str] = set()
    folder = os.path.dirname(os.path.abspath(ctx.path))
    for path, data in (*related_sources(ctx.project.paths(), folder), *imported_sources(ctx)):
        if path not in seen:
            seen.add(path)
            yield path, data
