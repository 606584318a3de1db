"""The project's files that belong to the same program as the file being linted.

A repository of separate examples is not one program: a file's program is its folder and
the folders above and below it (its *folder line*). Rules that ask whether another part
of the program does something (loads a pickled model back, strips the ``module.``
prefix, initialises a parameter) read those files' text, once per question and folder.
The modules the file imports, and those that import it, belong to its program wherever
they sit.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

from torchdoctor.static.context import FileContext
from torchdoctor.static.files import read_source
from torchdoctor.static.project import ProjectIndex
from torchdoctor.static.project_facts import ModuleFacts

__all__ = [
    "first_in_imported_files",
    "first_in_importing_files",
    "first_in_related_files",
    "imported_sources",
    "importing_paths",
    "parsed_module",
    "program_sources",
    "related_sources",
]

T = TypeVar("T")


def parsed_module(project: ProjectIndex, path: str) -> ast.Module | None:
    """The syntax tree of another file of the project, read and parsed once per project;
    ``None`` when it cannot be read or parsed."""

    def read() -> ast.Module | None:
        data = read_source(path)
        try:
            return ast.parse(data) if isinstance(data, bytes) else None
        except (SyntaxError, ValueError):
            return None

    return project.remember(f"parsed:{path}", read)


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


def first_in_importing_files(
    ctx: FileContext, question: str, answer: Callable[[str, bytes], T | None]
) -> T | None:
    """The first non-``None`` ``answer(path, text)`` over the project's modules that
    import the linted file (:func:`importing_paths`) off its folder line (those
    :func:`first_in_related_files` reads), remembered per ``question`` and file."""
    project = ctx.project
    own = os.path.abspath(ctx.path)
    folder = os.path.dirname(own)

    def search() -> T | None:
        for path in importing_paths(project, own):
            if _related(os.path.dirname(path), folder):
                continue
            data = read_source(path)
            found = answer(path, data) if isinstance(data, bytes) else None
            if found is not None:
                return found
        return None

    return project.remember(f"{question}:importers:{own}", search)


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


# --- the project's modules that import a file ----------------------------------------------


class _ImportTable:
    """Every module-level import of the project, by the dotted names it reaches."""

    __slots__ = ("importers", "modules", "plain")

    def __init__(self) -> None:
        # each prefix of an imported name (`ops`, `ops.conv`, `ops.conv.Conv`) -> importers
        self.importers: dict[str, set[str]] = {}
        # the package of a plain `import ops.conv`, all the import keeps -> importers
        self.plain: dict[str, set[str]] = {}
        # a dotted name a file can be imported by -> the files going by it
        self.modules: dict[str, list[str]] = {}


def importing_paths(project: ProjectIndex, path: str) -> list[str]:
    """The project's modules that import the file at ``path`` (``from ops.conv import
    Conv``, ``import ops.conv``, ``from ops import Conv`` through the package's
    ``__init__.py``), wherever they sit: TorchSemiSeg's ``utils/init_func.py`` imports
    ``seg_opr/conv_2_5d.py`` to initialise its classes' parameters by name. Read from the
    index's imports alone, built once per project; only a plain ``import ops.conv`` (the
    index keeps ``ops``) is confirmed in the file's text."""
    own = os.path.abspath(path)
    return project.remember(f"importing-paths:{own}", lambda: sorted(_importers(project, own)))


def _importers(project: ProjectIndex, own: str) -> set[str]:
    """The files importing ``own`` by one of its names, and those importing a name a
    package's ``__init__.py`` takes from it (one re-export deep)."""
    facts = project.facts_for(own)
    if facts is None:
        return set()
    table = project.remember("import-table", lambda: _import_table(project))
    names = _names_of(facts)
    found = _importers_of(table, names, own)
    found |= _plain_importers(table, names, own, found)
    for package in [p for p in found if p.endswith(os.sep + "__init__.py")]:
        package_facts = project.facts_for(package)
        if package_facts is None:
            continue
        package_names = _names_of(package_facts)
        for local, qualified in package_facts.imports.items():
            if any(qualified == n or qualified.startswith(n + ".") for n in names):
                found |= _importers_of(table, package_names, package, local)  # a re-export
    found.discard(own)
    return found


def _import_table(project: ProjectIndex) -> _ImportTable:
    table = _ImportTable()
    for path in project.paths():
        facts = project.facts_for(path)
        if facts is None:
            continue
        for name in _names_of(facts):
            table.modules.setdefault(name, []).append(path)
        for local, qualified in facts.imports.items():
            parts = qualified.split(".")
            for end in range(1, len(parts) + 1):
                table.importers.setdefault(".".join(parts[:end]), set()).add(path)
            if local == qualified:
                table.plain.setdefault(qualified, set()).add(path)
    return table


def _names_of(facts: ModuleFacts) -> set[str]:
    """The dotted names a file can be imported by: its module name, and the tails of its
    path (``seg_opr.conv_2_5d`` for ``furnace/seg_opr/conv_2_5d.py`` where a script puts
    ``furnace`` on ``sys.path``; ``seg_opr`` for its package), a standard library name
    alone left out (``import logging`` is not the project's ``utils/logging.py``)."""
    names = {facts.name}
    path = os.path.abspath(facts.path)
    if not path.endswith(".py"):
        return names
    init = os.sep + "__init__.py"
    parts = (path[: -len(init)] if path.endswith(init) else path[:-3]).split(os.sep)
    if not parts[-1].isidentifier():
        return names
    if parts[-1] not in sys.stdlib_module_names:
        names.add(parts[-1])
    for start in range(len(parts) - 2, -1, -1):
        if not parts[start].isidentifier():
            break
        names.add(".".join(parts[start:]))
    return names


def _importers_of(
    table: _ImportTable, names: set[str], target: str, attribute: str | None = None
) -> set[str]:
    """The files importing ``target`` (or its ``attribute``) by one of its ``names``,
    where the name reaches ``target`` from the importer (see :func:`_reaches`)."""
    found: set[str] = set()
    for name in names:
        key = name if attribute is None else f"{name}.{attribute}"
        for importer in table.importers.get(key, ()):
            if _reaches(table.modules.get(name, [target]), target, importer):
                found.add(importer)
    return found


def _plain_importers(table: _ImportTable, names: set[str], own: str, known: set[str]) -> set[str]:
    """Files with a plain ``import ops.conv`` (the index keeps ``ops``) that spell the
    module's dotted name in their text; ``known`` importers are not read again."""
    found: set[str] = set(known)
    for name in names:
        root, dot, _ = name.partition(".")
        if not dot:
            continue
        spelled = re.compile(rb"(?<![\w.])" + re.escape(name.encode()) + rb"\b")
        for importer in table.plain.get(root, ()):
            if importer in found or not _reaches(table.modules.get(name, [own]), own, importer):
                continue
            data = read_source(importer)
            if isinstance(data, bytes) and spelled.search(data):
                found.add(importer)
    return found - known


def _reaches(candidates: list[str], target: str, importer: str) -> bool:
    """Whether a name that several files go by (a ``model.py`` in each example folder)
    reaches ``target`` from ``importer``: the file nearest the importer wins, as in
    :meth:`ProjectIndex.module_class`."""
    if len(candidates) <= 1:
        return True
    here = os.path.dirname(importer)

    def shared(path: str) -> int:
        return len(os.path.commonpath([here, os.path.dirname(path)]))

    return shared(target) == max(shared(c) for c in candidates)
