"""Lint real code bases and print what a person needs to judge every finding.

For each tree given (and for all of them together) prints the files and lines linted, then
per severity and per code the count and the rate per 1,000 lines, then every error (and,
with ``--show warning``, every warning too) as ``file:line: CODE message`` so that each
can be read against the code and judged.

Usage::

    python benchmarks/corpus.py DIR [DIR ...] [--show error|warning|info] [--torch]
                                [--jobs N] [--select CODES] [--ignore CODES]

``--torch`` adds the installed torch package's sources (found without importing torch).
Lint runs in-process through the API (``torchdoctor.lint``), with the isolated default
config (``LintConfig()``): a tree's own ``pyproject.toml`` is not read.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from torchdoctor.findings import Finding, Severity
from torchdoctor.static import LintConfig, lint
from torchdoctor.static.config import DEFAULT_EXCLUDE
from torchdoctor.static.files import collect_files

_ORDER = (Severity.ERROR, Severity.WARNING, Severity.INFO)


def torch_root() -> Path | None:
    """The installed torch package's folder, or ``None``."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def count_lines(files: list[str]) -> int:
    """Physical lines of the files (what "per 1,000 lines" divides by)."""
    total = 0
    for path in files:
        try:
            with open(path, "rb") as handle:
                total += handle.read().count(b"\n")
        except OSError:
            continue
    return total


def rate(count: int, lines: int) -> float:
    """Findings per 1,000 lines."""
    return 1000.0 * count / lines if lines else 0.0


def summary(findings: list[Finding], lines: int) -> list[str]:
    """The per-severity and per-code table, one string per row."""
    rows = []
    by_severity = Counter(f.severity for f in findings)
    for severity in _ORDER:
        count = by_severity.get(severity, 0)
        rows.append(f"  {severity.value:<8} {count:6d}  {rate(count, lines):8.3f} /kloc")
    by_code = Counter((f.code, f.severity) for f in findings)
    for (code, severity), count in sorted(
        by_code.items(), key=lambda item: (item[0][1].rank * -1, item[0][0])
    ):
        rows.append(f"    {code} {severity.value:<8} {count:6d}  {rate(count, lines):8.3f} /kloc")
    return rows


def listing(findings: list[Finding], shown: Severity) -> list[str]:
    """Every finding at or above ``shown``, sorted by severity, file and line."""
    out = []
    chosen = [f for f in findings if f.severity >= shown]
    chosen.sort(
        key=lambda f: (-f.severity.rank, f.location.path or "", f.location.line or 0, f.code)
    )
    for found in chosen:
        where = f"{found.location.path}:{found.location.line or 0}"
        out.append(
            f"  [{found.severity.value}] {where}: {found.code} "
            f"({found.confidence.value}) {found.message}"
        )
    return out


def lint_tree(root: Path, args: argparse.Namespace) -> tuple[list[Finding], int, int, float]:
    """Lint one tree: its findings, files, lines and seconds."""
    config = LintConfig(exclude=DEFAULT_EXCLUDE, respect_gitignore=False)
    files = collect_files([root], config, root.resolve())
    lines = count_lines(files)
    start = time.perf_counter()
    report = lint(
        root,
        config=config,
        jobs=args.jobs,
        select=args.select.split(",") if args.select else None,
        ignore=args.ignore.split(",") if args.ignore else None,
    )
    return report.findings, len(files), lines, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the corpus report; returns the number of errors found (capped at 1 as exit)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--torch", action="store_true", help="add torch's own sources")
    parser.add_argument("--show", choices=[s.value for s in Severity], default="error")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--select", default="")
    parser.add_argument("--ignore", default="")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    roots = list(args.dirs)
    if args.torch:
        found = torch_root()
        if found is None:
            parser.error("torch is not installed here")
        roots.append(found)
    if not roots:
        parser.error("give at least one folder (or --torch)")
    shown = Severity(args.show)
    everything: list[Finding] = []
    total_lines = total_files = 0
    for root in roots:
        findings, files, lines, seconds = lint_tree(root, args)
        everything += findings
        total_files += files
        total_lines += lines
        print(f"== {root}: {files} files, {lines:,} lines, {seconds:.1f} s")
        print("\n".join(summary(findings, lines)))
        print("\n".join(listing(findings, shown)))
        print()
    if len(roots) > 1:
        print(f"== all: {total_files} files, {total_lines:,} lines")
        print("\n".join(summary(everything, total_lines)))
    return 1 if any(f.severity is Severity.ERROR for f in everything) else 0


if __name__ == "__main__":
    sys.exit(main())
