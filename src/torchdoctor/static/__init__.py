"""``lint``: static analysis of PyTorch training code. Never imports torch or the code it reads.

:func:`lint` is the entry point (``torchdoctor.lint`` resolves to it). It reads files and
folders, applies ``[tool.torchdoctor]`` from ``pyproject.toml``, runs every enabled rule
in one traversal per file (in parallel over files) and returns one
:class:`~torchdoctor.findings.Report`. :func:`lint_source` lints a string. Rules live in
:mod:`torchdoctor.static.rules`; its docstring is the guide to writing one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from torchdoctor.__about__ import __version__
from torchdoctor.findings import Report
from torchdoctor.rules.selection import Selection
from torchdoctor.static.config import LintConfig, find_config, load_config

if TYPE_CHECKING:
    from torchdoctor.static.fixes import FileFix

__all__ = ["FixOutcome", "LintConfig", "fix", "lint", "lint_source", "resolve_config"]

PathArg = str | os.PathLike[str]


def lint(
    paths: PathArg | Iterable[PathArg],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    config: PathArg | LintConfig | None = None,
    baseline: PathArg | None = None,
    jobs: int | None = None,
    test_code_as_info: bool | None = None,
) -> Report:
    """Lint files and folders and return the findings.

    Args:
        paths: files and folders; folders are searched for ``*.py`` files, skipping
            excluded paths (a file named explicitly is always linted).
        select: codes or prefixes to enable (default: the config's, else all).
        ignore: codes or prefixes to disable, on top of the config's.
        config: a ``pyproject.toml`` (or TOML file) to read, a :class:`LintConfig`, or
            ``None`` to use the closest ``pyproject.toml`` with ``[tool.torchdoctor]``.
        baseline: a JSON report (``--format json``) of known findings; only findings not
            in it are returned, matched by rule, file and line text, so they survive
            line shifts.
        jobs: worker processes (``None``: automatic, ``1``: none).
        test_code_as_info: report the warnings and errors of test code as info, saying
            why (``None``: the config's ``test-code-as-info``, on by default); see
            :mod:`torchdoctor.static.severity_in_tests`.

    Raises:
        UsageError: a path does not exist, or the config or baseline is unreadable.

    A rule that fails is a ``TD001`` finding; its traceback is kept out of the findings,
    in ``report.facts["internal_errors"]`` (printed by ``torchdoctor --debug``).
    """
    from torchdoctor.static.files import collect_files, per_file_ignored
    from torchdoctor.static.runner import FileJob, lint_files
    from torchdoctor.static.severity_in_tests import path_for_tests

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    settings = resolve_config(config, given)
    root = settings.root or Path.cwd().resolve()
    selection = Selection.from_options(
        tuple(select or ()) or settings.select or None, [*settings.ignore, *(ignore or ())]
    )
    files = collect_files(given, settings, root)
    if test_code_as_info is None:
        test_code_as_info = settings.test_code_as_info
    # Test code is told from the project's root down (its configuration's folder), else
    # from the folder given to lint, else from the current folder: never from folders
    # above the project (a checkout under ~/tests is not all tests).
    bases = [
        *([settings.root] if settings.root else []),
        *(Path(os.path.abspath(p)) for p in given if Path(p).is_dir()),
        Path.cwd().resolve(),
    ]
    jobs_list = [
        FileJob(
            path,
            per_file_ignored(path, settings, root),
            settings.max_file_size,
            path_for_tests(path, bases) if test_code_as_info else None,
        )
        for path in files
    ]
    report = Report(
        tool_version=__version__,
        command="lint",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    findings = lint_files(jobs_list, selection, jobs)
    if baseline is not None:
        from torchdoctor.static.baseline import filter_baseline, load_baseline

        findings, known = filter_baseline(findings, load_baseline(baseline))
        report.facts["baseline_known"] = known
    report.extend(findings)
    report.facts["files"] = len(files)
    if settings.source is not None:
        report.facts["config"] = str(settings.source)
    return report


def resolve_config(config: PathArg | LintConfig | None, paths: list[PathArg]) -> LintConfig:
    """The configuration :func:`lint` uses for ``config`` and ``paths``."""
    if isinstance(config, LintConfig):
        return config
    if config is not None:
        return load_config(Path(config))
    start = Path(paths[0]) if paths else Path.cwd()
    found = find_config(start if start.exists() else Path.cwd())
    return load_config(found) if found is not None else LintConfig()


def lint_source(
    source: str | bytes,
    path: str = "<string>",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    test_code_as_info: bool = True,
) -> Report:
    """Lint one module's source text.

    ``# noqa`` comments apply; no config file is read. ``path``, as given, is what tells
    test code (``tests/test_model.py``), whose warnings and errors are info unless
    ``test_code_as_info`` is false. As with :func:`lint`, a rule that fails is a
    ``TD001`` finding and its traceback is in ``report.facts["internal_errors"]``.
    """
    from torchdoctor.static.runner import lint_text

    selection = Selection.from_options(select, ignore)
    report = Report(tool_version=__version__, command="lint")
    report.extend(lint_text(path, source, selection, test_path=path if test_code_as_info else None))
    return report


@dataclass(frozen=True, slots=True)
class FixOutcome:
    """What :func:`fix` did.

    Attributes:
        report: the findings left after fixing (of the original files when nothing was
            written).
        files: every file that had an applicable fix, with its text before and after.
    """

    report: Report
    files: tuple[FileFix, ...]

    @property
    def applied(self) -> int:
        """How many fixes were applied in all."""
        return sum(f.applied for f in self.files)

    @property
    def changed(self) -> tuple[FileFix, ...]:
        """The files whose text changed."""
        return tuple(f for f in self.files if f.changed)

    def diff(self) -> str:
        """A unified diff of every change."""
        from torchdoctor.static.fixes import unified_diff

        return "".join(unified_diff(f) for f in self.changed)


def fix(
    paths: PathArg | Iterable[PathArg],
    *,
    unsafe: bool = False,
    write: bool = True,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    config: PathArg | LintConfig | None = None,
    jobs: int | None = None,
    test_code_as_info: bool | None = None,
) -> FixOutcome:
    """Apply automatic fixes to the files :func:`lint` would read.

    Only ``SAFE`` fixes apply unless ``unsafe``. With ``write=False`` nothing is written
    (use :meth:`FixOutcome.diff` to show the changes). Applying twice changes nothing the
    second time. ``test_code_as_info`` applies to the report as in :func:`lint`; fixes
    apply whatever a finding's severity.
    """
    from torchdoctor.static.files import per_file_ignored
    from torchdoctor.static.fixes import fix_file, write_fix
    from torchdoctor.static.runner import FileJob

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)

    def lint_all() -> Report:
        return lint(
            given,
            select=select,
            ignore=ignore,
            config=config,
            jobs=jobs,
            test_code_as_info=test_code_as_info,
        )

    before = lint_all()
    candidates = sorted(
        {f.location.path for f in before.findings if f.fix is not None and f.location.path}
    )
    settings = resolve_config(config, given)
    root = settings.root or Path.cwd().resolve()
    selection = Selection.from_options(
        tuple(select or ()) or settings.select or None, [*settings.ignore, *(ignore or ())]
    )
    results = []
    for path in candidates:
        result = fix_file(
            FileJob(path, per_file_ignored(path, settings, root)), selection, unsafe=unsafe
        )
        if result is not None and result.applied:
            results.append(result)
    if not write or not any(r.changed for r in results):
        return FixOutcome(before, tuple(results))
    for result in results:
        write_fix(result)
    after = lint_all()
    return FixOutcome(after, tuple(results))
