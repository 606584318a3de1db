"""Lint speed on the installed torch package's own sources.

Prints, measured in one run over the same files read into memory first:

* our single-process time divided by the time of ``ast.parse`` alone (aim: at most 2x);
* our wall time with a process pool (all CPUs);
* our time divided by TorchFix's on the same files, when TorchFix is installed in this
  environment (aim: at least 20x faster). TorchFix (libcst) is slow, so by default it runs
  on an evenly spaced sample of the files (``--torchfix-files 0`` for all of them).

Usage: ``python benchmarks/bench_lint.py [--root DIR] [--torchfix-files N] [--repeat N]``.
Nothing here imports torch: its folder is found with ``importlib.util.find_spec``.
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


def best_of(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def parse_all(sources: list[tuple[str, bytes]]) -> None:
    for _, data in sources:
        with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
            ast.parse(data)


def lint_all(sources: list[tuple[str, bytes]]) -> int:
    from torchdoctor.rules.selection import Selection
    from torchdoctor.static.runner import lint_text

    selection = Selection()
    return sum(len(lint_text(path, data, selection)) for path, data in sources)


def torchfix_all(sources: list[tuple[str, bytes]]) -> int:
    import libcst as cst
    from torchfix.torchfix import get_visitors_with_error_codes, process_error_code_str

    codes = list(process_error_code_str("ALL"))
    count = 0
    for _, data in sources:
        try:
            module = cst.parse_module(data)
        except Exception:  # noqa: BLE001 - TorchFix skips files it cannot parse too
            continue
        visitors = get_visitors_with_error_codes(codes)
        cst.MetadataWrapper(module, unsafe_skip_copy=True).visit_batched(visitors)
        count += sum(len(v.violations) for v in visitors)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--torchfix-files", type=int, default=150)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    root = args.root or torch_root()
    sources = read_sources(root)
    lines = sum(data.count(b"\n") for _, data in sources)
    print(f"corpus: {root} ({len(sources)} files, {lines:,} lines)")

    from torchdoctor.static.engine import rule_specs

    rule_specs()  # registration is start-up cost, not per-file cost
    parse = best_of(args.repeat, lambda: parse_all(sources))
    ours = best_of(args.repeat, lambda: lint_all(sources))
    print(f"ast.parse alone:            {parse:7.2f} s")
    print(f"torchdoctor lint, 1 process: {ours:7.2f} s   -> {ours / parse:.2f}x ast.parse "
          "(aim <= 2x)")

    from torchdoctor.static import LintConfig, lint

    workers = min(os.cpu_count() or 1, 8)
    start = time.perf_counter()
    lint(root, config=LintConfig(), jobs=workers)
    print(f"torchdoctor lint, {workers} processes (with file reading): "
          f"{time.perf_counter() - start:7.2f} s")

    if importlib.util.find_spec("torchfix") is None:
        print("TorchFix: not installed here (pip install torchfix) - comparison skipped")
        return
    sample = sources
    if args.torchfix_files and args.torchfix_files < len(sources):
        step = len(sources) / args.torchfix_files
        sample = [sources[int(i * step)] for i in range(args.torchfix_files)]
    ours_sample = best_of(args.repeat, lambda: lint_all(sample))
    theirs = best_of(1, lambda: torchfix_all(sample))
    print(f"TorchFix on {len(sample)} files: {theirs:7.2f} s; torchdoctor on the same files: "
          f"{ours_sample:.2f} s -> {theirs / ours_sample:.1f}x faster (aim >= 20x)")


if __name__ == "__main__":
    main()
