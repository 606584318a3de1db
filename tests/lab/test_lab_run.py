"""The debugging lab at the `run` depth: each lab script runs under the monitor.

Every ``examples/lab/*/`` whose rule is detected at run time is executed with
:func:`torchdoctor.runtime.run_script` (what ``torchdoctor run`` calls), in this process so
that torch is imported once, with ``--max-steps`` as a safety cap. ``buggy.py`` must be
flagged with the rule's code (at a marked line when the finding points into the file);
``fixed.py`` must not draw it. The process state a script may touch (RNG, default dtype,
grad and anomaly modes, warning filters, torch.compile caches, the working directory) is
restored after each script.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab import labkit
from torchdoctor.findings import Depth, Report

# The buggy programs make torch warn on purpose (TD003, TD306, TD607 are about those
# warnings). They are not filtered here: the monitor reads the warnings that are shown.
pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]
torch = pytest.importorskip("torch")

MAX_STEPS = 400


@contextlib.contextmanager
def isolated(folder: Path) -> Iterator[None]:
    """Run a lab script without leaking its process-wide settings into the next one."""
    rng, dtype = torch.get_rng_state(), torch.get_default_dtype()
    grad, anomaly = torch.is_grad_enabled(), torch.is_anomaly_enabled()
    threads, cwd = torch.get_num_threads(), os.getcwd()
    torch.set_num_threads(1)  # several test processes share a few cores
    os.chdir(folder)
    try:
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(cwd)
        torch.set_rng_state(rng)
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.autograd.set_detect_anomaly(anomaly)
        torch.set_num_threads(threads)
        dynamo = getattr(torch, "_dynamo", None)
        if dynamo is not None and hasattr(dynamo, "reset"):
            dynamo.reset()


# A lab whose file says `# lab: nproc-per-node=N` is a multi-process job: it runs as
# `torchdoctor run --nproc-per-node N` would (N gloo ranks on 127.0.0.1, one report).
_NPROC = re.compile(r"^# lab: nproc-per-node=(\d+)$", re.MULTILINE)
# A lab that needs a longer run than MAX_STEPS (a warm-up judged after 500 steps) says so.
_MAX_STEPS = re.compile(r"^# lab: max-steps=(\d+)$", re.MULTILINE)
JOB_MAX_STEPS, JOB_TIMEOUT_S, JOB_HANG_S = 12, 240, "20"


def run_lab(path: Path) -> Report:
    from torchdoctor.runtime.script import run_script

    text = path.read_text(encoding="utf-8")
    nproc = _NPROC.search(text)
    if nproc is not None:
        return run_job_lab(path, int(nproc.group(1)))
    longer = _MAX_STEPS.search(text)
    steps = int(longer.group(1)) if longer is not None else MAX_STEPS
    with isolated(path.parent):
        return run_script(str(path), [], max_steps=steps, status=False).report


def run_job_lab(path: Path, nproc: int) -> Report:
    from torchdoctor.distributed.job import launch
    from torchdoctor.runtime.children import ChildConfig

    saved = os.environ.get("TORCHDOCTOR_HANG_TIMEOUT")
    os.environ["TORCHDOCTOR_HANG_TIMEOUT"] = JOB_HANG_S  # a hang lab stops in seconds
    try:
        with isolated(path.parent):
            result = launch(
                str(path),
                [],
                nproc,
                timeout=JOB_TIMEOUT_S,
                config=ChildConfig(parts="", max_steps=JOB_MAX_STEPS),
            )
    finally:
        if saved is None:
            os.environ.pop("TORCHDOCTOR_HANG_TIMEOUT", None)
        else:
            os.environ["TORCHDOCTOR_HANG_TIMEOUT"] = saved
    assert result.exit_status != 124, f"{path} did not finish in {JOB_TIMEOUT_S} s"
    return result.report


@pytest.mark.parametrize("case", labkit.lab_params(Depth.RUN))
def test_buggy_is_flagged(case: labkit.LabCase) -> None:
    labkit.assert_flagged(run_lab(case.buggy), case, Depth.RUN, exact_lines=False)


@pytest.mark.parametrize("case", labkit.lab_params(Depth.RUN))
def test_fixed_is_quiet(case: labkit.LabCase) -> None:
    labkit.assert_quiet(run_lab(case.fixed), case)


@pytest.mark.parametrize("shape", labkit.shape_params(Depth.RUN))
def test_buggy_shape_is_flagged(shape: labkit.LabShape) -> None:
    labkit.assert_flagged(run_lab(shape.buggy), shape, Depth.RUN, exact_lines=False)


@pytest.mark.parametrize("shape", labkit.shape_params(Depth.RUN))
def test_fixed_shape_is_quiet(shape: labkit.LabShape) -> None:
    labkit.assert_quiet(run_lab(shape.fixed), shape)
