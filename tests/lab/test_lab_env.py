"""The lab at the ``env`` depth: each rule's buggy program sets up a flagged environment.

Protocol for a lab file of a rule with the ``env`` depth:

* ``configure() -> None`` applies the program's environment settings the way the program
  does at start-up (environment variables, torch's process-wide flags); ``main()`` calls
  it first (required);
* ``LAB_REQUIRES_CPUS = n`` skips the file on machines with fewer CPUs, for settings that
  are only wrong where there is more than one (optional).

The driver snapshots ``os.environ`` and torch's process-wide settings (default dtype,
intra-op threads, anomaly mode, cuDNN flags, deterministic algorithms, RNG state), calls
``configure()``, runs :func:`torchdoctor.env.diagnose` in this process and restores
everything. The buggy file must draw the rule's code, the fixed file none of it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.labkit import LabCase, assert_flagged, assert_quiet, lab_params, load_module
from torchdoctor.findings import Depth, Report

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


@contextlib.contextmanager
def restored_process_state() -> Iterator[None]:
    """Undo whatever a lab's ``configure()`` changes in this process."""
    cudnn = torch.backends.cudnn
    environ = dict(os.environ)
    saved = (
        torch.get_default_dtype(),
        torch.get_num_threads(),
        torch.is_anomaly_enabled(),
        torch.is_anomaly_check_nan_enabled(),
        cudnn.benchmark,
        cudnn.deterministic,
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_rng_state(),
    )
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        (
            dtype,
            threads,
            anomaly,
            check_nan,
            benchmark,
            deterministic,
            algorithms,
            warn_only,
            rng,
        ) = saved
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.autograd.set_detect_anomaly(anomaly, check_nan)
        cudnn.benchmark, cudnn.deterministic = benchmark, deterministic
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.set_rng_state(rng)


def env_report(lab_file: Path) -> Report:
    """Apply a lab file's ``configure()`` and diagnose the resulting environment."""
    from torchdoctor.env import diagnose

    module = load_module(lab_file)
    if (os.cpu_count() or 1) < getattr(module, "LAB_REQUIRES_CPUS", 1):
        pytest.skip(f"{lab_file.parent.name} needs {module.LAB_REQUIRES_CPUS} CPUs")
    with restored_process_state():
        # As a fresh process has it: one thread per usable CPU. Other tests in this worker
        # may have left torch at one thread (tests/unit/runtime's conftest does), and a
        # lab file about thread counts would then depend on which tests ran before it.
        import torch

        torch.set_num_threads(_usable_cpus())
        module.configure()
        return diagnose()


def _usable_cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@pytest.mark.parametrize("case", lab_params(Depth.ENV))
def test_buggy_is_flagged(case: LabCase) -> None:
    assert_flagged(env_report(case.buggy), case, Depth.ENV, exact_lines=False)


@pytest.mark.parametrize("case", lab_params(Depth.ENV))
def test_fixed_is_quiet(case: LabCase) -> None:
    assert_quiet(env_report(case.fixed), case)
