"""``torchdoctor demo``: every depth on a bundled buggy training script, zero set-up.

The script, ``buggy_train.py`` next to this module, is a small image classifier with
classic silent bugs. :func:`run_demo` lints it, pre-flights its ``make()`` with ``check``,
and runs it for a few dozen optimizer steps under the runtime monitor; each section keeps
the command that reproduces it.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torchdoctor.findings import Depth, Report

__all__ = ["SCRIPT", "DemoResult", "DemoSection", "run_demo"]

SCRIPT = Path(__file__).resolve().with_name("buggy_train.py")


@dataclass(frozen=True, slots=True)
class DemoSection:
    """What one depth found in the demo script, and how to see it again yourself."""

    depth: Depth
    title: str
    command: str
    report: Report
    seconds: float


@dataclass(frozen=True, slots=True)
class DemoResult:
    """The demo's sections, and all their findings merged into one report."""

    script: Path
    sections: tuple[DemoSection, ...]
    combined: Report


def run_demo(*, run_steps: int = 40) -> DemoResult:
    """Lint, check and run the bundled buggy script; return what each depth found.

    Args:
        run_steps: optimizer steps the runtime section lets the script take.

    Raises:
        TorchMissingError: PyTorch is not installed (``check`` and ``run`` need it).
    """
    from torchdoctor._torch import require_torch

    require_torch("torchdoctor demo")
    sections = (
        _timed(
            Depth.LINT,
            "Static analysis: the source, never run",
            f"torchdoctor lint {SCRIPT}",
            _lint,
        ),
        _timed(
            Depth.CHECK,
            "Pre-flight: the model, a batch, the loss and the optimizer",
            f"torchdoctor check {SCRIPT}:make",
            _check,
        ),
        _timed(
            Depth.RUN,
            f"Runtime: the script itself, for {run_steps} optimizer steps",
            f"torchdoctor run {SCRIPT} --max-steps {run_steps}",
            lambda: _run(run_steps),
        ),
    )
    combined = Report(command="demo")
    for section in sections:
        combined.merge(section.report)
    combined.facts["script"] = str(SCRIPT)
    return DemoResult(SCRIPT, sections, combined)


def _timed(depth: Depth, title: str, command: str, produce: Callable[[], Report]) -> DemoSection:
    start = time.perf_counter()
    report = produce()
    return DemoSection(depth, title, command, report, time.perf_counter() - start)


def _lint() -> Report:
    from torchdoctor.static import lint

    return lint([SCRIPT])


def _check() -> Report:
    from torchdoctor.preflight.factory import check_factory

    return check_factory(f"{SCRIPT}:make")


def _run(steps: int) -> Report:
    import torch

    from torchdoctor.runtime.script import run_script

    # The demo's model is tiny, so one thread is fastest; with several, each op waits for
    # a descheduled thread whenever the cores are busy (seen: 7 s instead of 0.7 s).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # The script prints its own progress; keep the demo's output to the reports.
        with contextlib.redirect_stdout(io.StringIO()):
            result = run_script(str(SCRIPT), max_steps=steps, status=False)
    finally:
        torch.set_num_threads(threads)
    return result.report
