"""Linting many files: the per-file pipeline and the process pool around it.

Many files are linted in two phases. First every file is read and parsed once, and its
facts (:mod:`~torchdoctor.static.project_facts`) go into one
:class:`~torchdoctor.static.project.ProjectIndex`; then each file's rules run with that
index, so that a rule can ask about a class defined in another file. In one process the
parsed trees are kept between the phases (up to :data:`_TREE_CACHE_BYTES` of source, then
the rest is parsed again in the second phase); with a process pool, the workers build
the facts in the first phase and parse again in the second (the index itself crosses
to each worker once, through the pool's initializer).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.context
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import ParamSpec

from torchdoctor._kernel import internal_error
from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth, Finding, Location
from torchdoctor.progress import advance
from torchdoctor.rules.selection import Selection
from torchdoctor.static.context import FileContext
from torchdoctor.static.engine import lint_tree
from torchdoctor.static.files import read_source
from torchdoctor.static.project import ProjectIndex
from torchdoctor.static.project_facts import ModuleFacts, summarise
from torchdoctor.static.severity_in_tests import lowered_in_tests, relative_paths, why_test_code
from torchdoctor.static.source import UNPARSABLE, Parsed, parse
from torchdoctor.static.suppression import filter_suppressed

__all__ = ["FileJob", "lint_files", "lint_sources", "lint_text"]

_Arguments = ParamSpec("_Arguments")

# Below this many files a process pool costs more than it saves.
_POOL_THRESHOLD = 48
# Parsed trees kept between the two phases of one process, in bytes of source text. A
# syntax tree takes about 30 times the memory of its source: all of torch's sources (50 MB)
# fit, at about 1.5 GB; a typical project (a few MB) takes a few hundred MB at most. The
# files beyond the cap are parsed again in phase two.
_TREE_CACHE_BYTES = 64_000_000


@dataclass(frozen=True, slots=True)
class FileJob:
    """One file to lint: its path and the code prefixes ignored for it."""

    path: str
    ignored: tuple[str, ...] = ()
    max_bytes: int | None = None  # files over this size are skipped (None: the default)
    # The path relative to the project, by which test code is recognised (its findings
    # are lowered to info, see static.severity_in_tests); None: no file is test code.
    test_path: str | None = None


def lint_text(
    path: str,
    data: bytes | str,
    selection: Selection,
    project: ProjectIndex | None = None,
    parsed: Parsed | Finding | None = None,
    test_path: str | None = None,
) -> list[Finding]:
    """Lint one file's content: parse, run the rules, apply ``# noqa``, then lower the
    findings of test code to info.

    ``project`` is the index of the files linted together (this file alone when
    ``None``); ``parsed`` is the file already parsed (phase one kept it); ``test_path``
    is the path relative to the project that tells test code (``None``: never test
    code; see :mod:`torchdoctor.static.severity_in_tests`).

    Never raises for any input: unparsable input gives a TD002 finding, a failure of
    ours a TD001 finding (see :func:`torchdoctor._kernel.internal_error`).
    """
    try:
        if parsed is None:
            parsed = parse(data, path)
        if isinstance(parsed, Finding):
            return [parsed] if selection.is_enabled(UNPARSABLE) else []
        ctx = FileContext(path, parsed.text, parsed.tree, project, test_path)
        found = lint_tree(ctx, selection)
        if not found:
            return found
        found = filter_suppressed(found, parsed.text, ctx.lines)
        if test_path is not None and found:
            reason = why_test_code(test_path, parsed.tree, parsed.text)
            if reason is not None:
                found = lowered_in_tests(found, reason)
        return found
    except RecursionError:
        return [
            internal_error(
                "lint",
                None,
                Depth.LINT,
                Location(path=path),
                message=f"lint failed on {path}: the file is nested too deeply for "
                "torchdoctor's analysis",
            )
        ]
    except Exception as error:  # noqa: BLE001 - the last line of defence for one file
        return [
            internal_error(
                "lint",
                error,
                Depth.LINT,
                Location(path=path),
                message=f"lint failed on {path}: {type(error).__name__}: {error}",
            )
        ]


def _read(path: str, max_bytes: int | None = None) -> bytes | Finding:
    # Regular files only, bounded in size: see torchdoctor.static.files.read_source.
    if max_bytes is None:
        return read_source(path)
    return read_source(path, max_bytes)


def _parse_job(job: FileJob) -> Parsed | Finding | None:
    """Phase one for one file: read and parse it. ``None`` when that failed in a way
    phase two must report (it reads and parses again, inside its own guard)."""
    data = _read(job.path, job.max_bytes)
    if isinstance(data, Finding):
        return None
    try:
        return parse(data, job.path)
    except Exception:  # noqa: BLE001 - phase two reports it as TD001 with its traceback
        return None


def _facts(job: FileJob, parsed: Parsed | Finding | None) -> ModuleFacts | None:
    if not isinstance(parsed, Parsed):
        return None
    try:
        return summarise(job.path, parsed.tree)
    except Exception:  # noqa: BLE001 - a file without facts is linted all the same
        return None


def _add_facts(project: ProjectIndex, facts: ModuleFacts | None, tree_kept: bool) -> None:
    """Add a file's facts to the index. Facts read class and function bodies on first
    use, from the tree; a tree that is not kept for phase two is read in full now, so
    that it can be freed."""
    if facts is not None and not tree_kept:
        facts = _completed(facts)
    if facts is not None:
        project.add(facts)


def _completed(facts: ModuleFacts) -> ModuleFacts | None:
    """The facts with every body read (their tree no longer needed); ``None`` when that
    fails: a file without facts is linted all the same."""
    try:
        facts.complete()
    except Exception:  # noqa: BLE001 - see above
        return None
    return facts


def lint_path(
    job: FileJob,
    selection: Selection,
    project: ProjectIndex | None = None,
    parsed: Parsed | Finding | None = None,
) -> list[Finding]:
    """Read and lint one file; an unreadable file is a TD002 finding."""
    data: bytes | Finding = b"" if parsed is not None else _read(job.path, job.max_bytes)
    if isinstance(data, Finding):
        found = [data]
    else:
        found = lint_text(job.path, data, selection, project, parsed, job.test_path)
    if job.ignored:
        found = [
            f
            for f in found
            if f.code == INTERNAL_ERROR_CODE or not any(f.code.startswith(p) for p in job.ignored)
        ]
    return found


@contextlib.contextmanager
def _kept_trees() -> Iterator[Callable[[], None]]:
    """While parsed trees are kept for the second phase, keep them out of the cyclic
    garbage collector's way: every full collection would walk them all again (it doubled
    the time of parsing). Syntax trees hold no cycles; reference counting frees them as
    usual. Does nothing when the collector is off or the program froze objects itself."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield lambda: None
        return
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def _collected(
    lint: Callable[_Arguments, list[Finding]], *args: _Arguments.args, **kwargs: _Arguments.kwargs
) -> list[Finding]:
    """Run one file's rules with the automatic garbage collector paused, then collect the
    young generation once. The rules make many short-lived containers (items, frames,
    bindings); hundreds of automatic collections per file cost three times as much as
    this one (measured on 300 of torch's files: 0.22 s against 0.08 s of collector
    time). The walk unlinks its own cycles when it ends (``Walker.release``), so the
    collection finds little; it stays for any cycle a rule makes. Does nothing special
    when the collector is off."""
    if not gc.isenabled():
        return lint(*args, **kwargs)
    gc.disable()
    try:
        return lint(*args, **kwargs)
    finally:
        gc.collect(0)
        gc.enable()


def _lint_serial(jobs: Sequence[FileJob], selection: Selection) -> list[Finding]:
    """Both phases in this process, keeping the parsed trees in between."""
    project = ProjectIndex()
    kept: list[Parsed | Finding | None] = []
    budget = _TREE_CACHE_BYTES
    out: list[Finding] = []
    with _kept_trees() as freeze:
        for job in jobs:
            parsed = _parse_job(job)
            size = len(parsed.text) if isinstance(parsed, Parsed) else 0
            budget -= size
            kept.append(parsed if budget >= 0 or not size else None)
            _add_facts(project, _facts(job, parsed), kept[-1] is not None)
            freeze()
        for index, (job, parsed) in enumerate(zip(jobs, kept, strict=True)):
            kept[index] = None  # each tree is freed once its file is linted
            out.extend(_collected(lint_path, job, selection, project, parsed))
            advance("lint", job.path, index + 1, len(jobs))
    return out


def lint_sources(
    sources: Sequence[tuple[str, bytes | str]],
    selection: Selection,
    test_code_as_info: bool = True,
) -> list[Finding]:
    """Lint files already in memory as one project: each is parsed once (up to
    :data:`_TREE_CACHE_BYTES` of source; the rest again in phase two), the index is built
    from all of them, then their rules run (what ``lint`` does, without reading). Test
    code is told by the paths relative to the folder that holds them all."""
    project = ProjectIndex()
    test_paths: list[str | None] = (
        list(relative_paths([path for path, _ in sources]))
        if test_code_as_info
        else [None] * len(sources)
    )
    parsed_all: list[Parsed | Finding | None] = []
    out: list[Finding] = []
    budget = _TREE_CACHE_BYTES
    with _kept_trees() as freeze:
        for path, data in sources:
            try:
                parsed: Parsed | Finding | None = parse(data, path)
            except Exception:  # noqa: BLE001 - lint_text reports it with its traceback
                parsed = None
            size = len(parsed.text) if isinstance(parsed, Parsed) else 0
            budget -= size
            parsed_all.append(parsed if budget >= 0 or not size else None)
            _add_facts(project, _facts(FileJob(path), parsed), parsed_all[-1] is not None)
            freeze()
        for index, (path, data) in enumerate(sources):
            parsed = parsed_all[index]
            parsed_all[index] = None
            out.extend(
                _collected(lint_text, path, data, selection, project, parsed, test_paths[index])
            )
    return out


def _facts_chunk(jobs: Sequence[FileJob]) -> list[ModuleFacts]:
    """Phase one in a worker: the facts go back to the parent, not the trees, so each
    file's facts are read in full at once and its tree freed (kept alive until the
    chunk is sent, the trees would make every collection walk them all again)."""
    out = []
    for job in jobs:
        facts = _facts(job, _parse_job(job))
        if facts is not None and (facts := _completed(facts)) is not None:
            out.append(facts)
    return out


_WORKER_PROJECT: ProjectIndex | None = None


def _set_worker_project(project: ProjectIndex) -> None:
    global _WORKER_PROJECT
    _WORKER_PROJECT = project


def _lint_chunk(jobs: Sequence[FileJob], selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    for job in jobs:
        out.extend(_collected(lint_path, job, selection, _WORKER_PROJECT))
    return out


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fresh worker processes, never ``fork``: forking a process that runs threads (an
    IDE, a test runner such as pytest-xdist, a pre-commit hook) can copy a lock held by
    another thread and hang the child forever. ``forkserver`` forks from a clean,
    single-threaded server; ``spawn`` where it does not exist."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def default_workers(files: int) -> int:
    """Worker processes for linting ``files`` files when the caller does not say. A pool
    reads and parses every file twice (the index first, then the rules) and starts two
    sets of processes, so it pays only for many files on three CPUs or more: on two, all
    of torch's sources took 16.6 s with two workers and 14.0 s in one process."""
    cpus = os.cpu_count() or 1
    if files < _POOL_THRESHOLD or cpus < 3:
        return 1
    return min(cpus, 8)


def lint_files(
    jobs: Sequence[FileJob], selection: Selection, workers: int | None = None
) -> list[Finding]:
    """Lint files, in parallel processes when there are many.

    Args:
        jobs: the files.
        selection: enabled codes.
        workers: process count; ``None`` picks :func:`default_workers`, ``1`` never
            starts a process.
    """
    if workers is None:
        workers = default_workers(len(jobs))
    if workers <= 1 or len(jobs) < 2:
        return _lint_serial(jobs, selection)
    size = max(1, len(jobs) // (workers * 8))
    chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    out: list[Finding] = []
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
            project = ProjectIndex(f for facts in pool.map(_facts_chunk, chunks) for f in facts)
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_pool_context(),
            initializer=_set_worker_project,
            initargs=(project,),
        ) as pool:
            done = 0
            for chunk, result in zip(
                chunks, pool.map(_lint_chunk, chunks, [selection] * len(chunks)), strict=True
            ):
                out.extend(result)
                done += len(chunk)
                advance("lint", "", done, len(jobs))
    except (OSError, RuntimeError):  # no processes here (sandbox, broken pool): go serial
        return _lint_serial(jobs, selection)
    return out
