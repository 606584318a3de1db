"""Linting many files: the per-file pipeline and the process pool around it."""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth, Finding, Location
from torchdoctor.rules.registry import finding
from torchdoctor.rules.selection import Selection
from torchdoctor.static.context import FileContext
from torchdoctor.static.engine import TRACEBACK, lint_tree
from torchdoctor.static.source import UNPARSABLE, parse
from torchdoctor.static.suppression import filter_suppressed

__all__ = ["FileJob", "lint_files", "lint_text"]

# Below this many files a process pool costs more than it saves.
_POOL_THRESHOLD = 48


@dataclass(frozen=True, slots=True)
class FileJob:
    """One file to lint: its path and the code prefixes ignored for it."""

    path: str
    ignored: tuple[str, ...] = ()


def lint_text(path: str, data: bytes | str, selection: Selection) -> list[Finding]:
    """Lint one file's content: parse, run the rules, apply ``# noqa``.

    Never raises for any input: unparsable input gives a TD002 finding, a failure of
    ours a TD001 finding (with its traceback in the evidence, see
    :data:`~torchdoctor.static.engine.TRACEBACK`).
    """
    try:
        parsed = parse(data, path)
        if isinstance(parsed, Finding):
            return [parsed] if selection.is_enabled(UNPARSABLE) else []
        ctx = FileContext(path, parsed.text, parsed.tree)
        found = lint_tree(ctx, selection)
        return filter_suppressed(found, parsed.text, ctx.lines)
    except RecursionError:
        return [_internal(path, "the file is nested too deeply for torchdoctor's analysis")]
    except Exception as error:  # noqa: BLE001 - the last line of defence for one file
        return [_internal(path, f"{type(error).__name__}: {error}",
                          "".join(traceback.format_exception(error)))]


def _internal(path: str, what: str, trace: str | None = None) -> Finding:
    return finding(INTERNAL_ERROR_CODE, f"lint failed on {path}: {what}",
                   Location(path=path), Depth.LINT,
                   fix_hint="This is a bug in torchdoctor: report it with this message.",
                   evidence={TRACEBACK: trace} if trace else None)


def lint_path(job: FileJob, selection: Selection) -> list[Finding]:
    """Read and lint one file; an unreadable file is a TD002 finding."""
    try:
        with open(job.path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        found = [finding(UNPARSABLE, f"{job.path} cannot be read: "
                         f"{error.strerror or error}", Location(path=job.path), Depth.LINT,
                         fix_hint="Check the path and its permissions.")]
    else:
        found = lint_text(job.path, data, selection)
    if job.ignored:
        found = [f for f in found if f.code == INTERNAL_ERROR_CODE
                 or not any(f.code.startswith(p) for p in job.ignored)]
    return found


def _lint_chunk(jobs: Sequence[FileJob], selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    for job in jobs:
        out.extend(lint_path(job, selection))
    return out


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fresh worker processes, never ``fork``: forking a process that runs threads (an
    IDE, a test runner such as pytest-xdist, a pre-commit hook) can copy a lock held by
    another thread and hang the child forever. ``forkserver`` forks from a clean,
    single-threaded server; ``spawn`` where it does not exist."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def lint_files(jobs: Sequence[FileJob], selection: Selection, workers: int | None = None
               ) -> list[Finding]:
    """Lint files, in parallel processes when there are many.

    Args:
        jobs: the files.
        selection: enabled codes.
        workers: process count; ``None`` picks one per CPU (at most 8) for many files,
            ``1`` never starts a process.
    """
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if len(jobs) >= _POOL_THRESHOLD else 1
    if workers <= 1 or len(jobs) < 2:
        return _lint_chunk(jobs, selection)
    size = max(1, len(jobs) // (workers * 8))
    chunks = [jobs[i:i + size] for i in range(0, len(jobs), size)]
    out: list[Finding] = []
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
            for result in pool.map(_lint_chunk, chunks, [selection] * len(chunks)):
                out.extend(result)
    except (OSError, RuntimeError):  # no processes here (sandbox, broken pool): go serial
        return _lint_chunk(jobs, selection)
    return out
