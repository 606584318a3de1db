"""Size and time of the HTML report of a long run.

Builds the report a 10,000-step run would leave (``--steps``): a loss series (2,000
values, as the monitor keeps it), a global gradient norm and 12 module groups, the learning
rate, memory and the step time split into data wait and compute, one value per step each,
plus findings at steps and a few dozen lint-style findings with code frames. Then renders
it with ``--format html`` (median of ``--repeats``, the first, cold render shown apart:
it loads jinja2, the templates and the rule docs) and prints the page's size. The aims:
under 1 s and under 2 MB. Run with ``python benchmarks/bench_html.py``.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.report import RenderOptions, render
from torchdoctor.rules.registry import finding


def long_run_report(steps: int, seed: int = 0) -> Report:
    """A report shaped like a long watched run, with noisy series of every plotted kind."""
    rng = random.Random(seed)
    report = Report(
        tool_version="0.1.0",
        command="run",
        created="2026-01-01T00:00:00+00:00",
        facts={
            "steps": steps,
            "duration_s": steps * 0.08,
            "step_time_ms": 80.0,
            "batch_wait_s": steps * 0.004,
        },
    )
    report.series["loss"] = [2.3 * math.exp(-i / 700) + 0.1 * rng.random() for i in range(2000)]
    report.series["grad_norm"] = [1 + rng.random() for _ in range(steps)]
    for group in range(12):
        report.series[f"grad_norm/blocks.{group}"] = [0.1 * rng.random() for _ in range(steps)]
    report.series["update_ratio"] = [1e-3 * (1 + rng.random()) for _ in range(steps)]
    report.series["lr"] = [1e-3 * min(1.0, i / 500) for i in range(steps)]
    report.series["memory_mb"] = [900 + i * 0.01 for i in range(steps)]
    report.series["data_wait_ms"] = [4 + rng.random() for _ in range(steps)]
    report.series["compute_ms"] = [76 + 3 * rng.random() for _ in range(steps)]
    for index in range(40):
        report.add(
            finding(
                "TD201",
                f"`optimizer.step()` at line {index + 10} never clears",
                Location(
                    path=f"train_{index}.py",
                    line=index + 10,
                    column=4,
                    snippet="    optimizer.step()",
                ),
                Depth.RUN,
                evidence={"step": rng.randrange(steps), "ratio": 3.0},
            )
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    report = long_run_report(args.steps)
    options = RenderOptions(title="torchdoctor run train.py")
    start = time.perf_counter()
    page = render(report, "html", options)
    cold = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        render(report, "html", options)
        times.append(time.perf_counter() - start)
    size = len(page.encode("utf-8"))
    warm = statistics.median(times)
    print(
        f"HTML report of a {args.steps:,}-step run: {size / 1e6:.3f} MB "
        f"({size / 2e6:.1%} of the 2 MB aim)"
    )
    print(
        f"render time: first {cold * 1e3:.0f} ms, then median {warm * 1e3:.0f} ms of "
        f"{args.repeats} ({max(cold, warm) / 1.0:.1%} of the 1 s aim)"
    )


if __name__ == "__main__":
    main()
