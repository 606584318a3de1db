"""Lint speed on the installed torch package's own sources.

Prints, measured in one run over the same files read into memory first:

* our single-process time divided by the time of ``ast.parse`` alone (aim: at most 2x).
  "Ours" is the whole pipeline of ``lint`` on a project: every file parsed once, the
  project index built from all of them, then every rule on every file. The two are timed
  side by side in alternating rounds (parse all, lint all, parse all, lint all...), and the
  fastest round of each is compared, so that a machine whose load changes during the run
  does not favour either;
* our wall time with a process pool (all CPUs);
* our time divided by TorchFix's on the same files, when TorchFix is installed in this
  environment (aim: at least 20x faster). TorchFix (libcst) is slow, so by default it runs
  on an evenly spaced sample of the files (``--torchfix-files 0`` for all of them).

Usage: ``python benchmarks/bench_lint.py [--root DIR] [--files N] [--torchfix-files N]
[--repeat N]`` (``--files``: an evenly spaced sample of that many files; 0 for all).
Nothing here imports torch: its folder is found with ``importlib.util.find_spec``.

Counted in instructions instead of seconds (independent of the machine's load), with
``--only parse|lint|nothing``: one pass of that phase after the same start-up, to run
under ``valgrind --tool=cachegrind --cache-sim=no``; the ratio is (lint - nothing) /
(parse - nothing) of the three instruction counts.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path


def torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed here; pass --root DIR")
    return Path(next(iter(spec.submodule_search_locations)))


def read_sources(root: Path) -> list[tuple[str, bytes]]:
    files = sorted(root.rglob("*.py"))
    return [(str(path), path.read_bytes()) for path in files]


def interleaved(
    sources: list[tuple[str, bytes]],
    first: Callable[[str, bytes], object],
    second: Callable[[str, bytes], object],
) -> tuple[float, float]:
    """Total time of ``first`` and of ``second`` over the files, timed file by file in
    turn, so that a machine whose load changes during the run slows both alike."""
    total_first = total_second = 0.0
    clock = time.perf_counter
    for path, data in sources:
        start = clock()
        first(path, data)
        middle = clock()
        second(path, data)
        total_first += middle - start
        total_second += clock() - middle
    return total_first, total_second


def parse_one(path: str, data: bytes) -> None:
    with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
        ast.parse(data)


def parse_all(sources: list[tuple[str, bytes]]) -> float:
    start = time.perf_counter()
    for path, data in sources:
        parse_one(path, data)
    return time.perf_counter() - start


def lint_all(sources: list[tuple[str, bytes]]) -> float:
    from torchdoctor.rules.selection import Selection
    from torchdoctor.static.runner import lint_sources

    start = time.perf_counter()
    lint_sources(sources, Selection())
    return time.perf_counter() - start


def lint_one_factory() -> Callable[[str, bytes], object]:
    from torchdoctor.rules.selection import Selection
    from torchdoctor.static.runner import lint_text

    selection = Selection()
    return lambda path, data: lint_text(path, data, selection)


def torchfix_one_factory() -> Callable[[str, bytes], object]:
    import libcst as cst
    from torchfix.torchfix import get_visitors_with_error_codes, process_error_code_str

    codes = list(process_error_code_str("ALL"))

    def run(path: str, data: bytes) -> object:
        try:
            module = cst.parse_module(data)
        except Exception:  # noqa: BLE001 - TorchFix skips files it cannot parse too
            return None
        visitors = get_visitors_with_error_codes(codes)
        cst.MetadataWrapper(module, unsafe_skip_copy=True).visit_batched(visitors)
        return visitors

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--files", type=int, default=0)
    parser.add_argument("--torchfix-files", type=int, default=150)
    parser.add_argument("--only", choices=("parse", "lint", "nothing"), default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    root = args.root or torch_root()
    sources = read_sources(root)
    if args.files and args.files < len(sources):
        step = len(sources) / args.files
        sources = [sources[int(i * step)] for i in range(args.files)]
    lines = sum(data.count(b"\n") for _, data in sources)
    print(f"corpus: {root} ({len(sources)} files, {lines:,} lines)")

    from torchdoctor.static.engine import rule_specs

    rule_specs()  # registration is start-up cost, not per-file cost
    lint_one = lint_one_factory()
    lint_one(*sources[0])  # warm caches and imports
    if args.only is not None:
        if args.only != "nothing":
            (parse_all if args.only == "parse" else lint_all)(sources)
        return
    parse = ours = float("inf")
    for _ in range(max(1, args.repeat)):
        parse = min(parse, parse_all(sources))
        ours = min(ours, lint_all(sources))
    print(f"ast.parse alone:             {parse:7.2f} s   (fastest of {args.repeat} rounds)")
    print(
        f"torchdoctor lint, 1 process: {ours:7.2f} s   -> "
        f"{ours / parse:.2f}x ast.parse (aim <= 2x; index built, one parse per file)"
    )

    from torchdoctor.static import LintConfig, lint

    workers = min(os.cpu_count() or 1, 8)
    start = time.perf_counter()
    lint([path for path, _ in sources], config=LintConfig(), jobs=workers)
    print(
        f"torchdoctor lint, {workers} processes, reading the files too: "
        f"{time.perf_counter() - start:7.2f} s"
    )

    if importlib.util.find_spec("torchfix") is None:
        print("TorchFix: not installed here (pip install torchfix) - comparison skipped")
        return
    sample = sources
    if args.torchfix_files and args.torchfix_files < len(sources):
        step = len(sources) / args.torchfix_files
        sample = [sources[int(i * step)] for i in range(args.torchfix_files)]
    theirs, ours_sample = interleaved(sample, torchfix_one_factory(), lint_one)
    print(
        f"TorchFix on {len(sample)} files: {theirs:7.2f} s; torchdoctor on the same files: "
        f"{ours_sample:.2f} s -> {theirs / ours_sample:.1f}x faster (aim >= 20x)"
    )


if __name__ == "__main__":
    main()
