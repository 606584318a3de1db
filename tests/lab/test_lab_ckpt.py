"""The lab at the ``ckpt`` depth: each rule's buggy program saves a flagged checkpoint.

Protocol for a lab file of a rule with the ``ckpt`` depth:

* ``save_checkpoint(path: str) -> None`` runs the program briefly and saves its checkpoint
  to ``path`` exactly as the program does (required);
* ``make_model() -> nn.Module`` builds the model the program loads the checkpoint into
  (optional); when present, the checkpoint is compared with it, as
  ``torchdoctor ckpt FILE --model file.py:make_model`` would;
* ``LAB_SAVED_ON = "cuda:0"`` says the program trains on that GPU (optional). Without
  CUDA the driver saves under :func:`tests.unit.ckpt.simulate.saved_on_cuda`, which
  records every storage as saved from the GPU except those copied with ``.cpu()``.

A program that starts a process group saves in a process of its own
(:mod:`tests.lab.ckpt_saver`), which exits before any teardown: a gloo group torn down
later in the test process can deadlock. The driver passes the file to
:func:`torchdoctor.ckpt.diagnose`; the buggy file must draw
the rule's code, the fixed file none of it. Checkpoint findings point into the saved file,
not at source lines, so markers play no part here.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.labkit import LabCase, assert_flagged, assert_quiet, lab_params, load_module
from torchdoctor.findings import Depth, Report

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


def ckpt_report(lab_file: Path, tmp_path: Path) -> Report:
    """Run a lab file's ``save_checkpoint`` and diagnose what it saved."""
    from tests.unit.ckpt.simulate import saved_on_cuda
    from torchdoctor.ckpt import diagnose

    module = load_module(lab_file)
    target = tmp_path / f"{lab_file.stem}.pt"
    if "init_process_group" in lab_file.read_text(encoding="utf-8"):
        _save_in_own_process(lab_file, target)  # see tests.lab.ckpt_saver
    else:
        device = getattr(module, "LAB_SAVED_ON", None)
        simulate = device is not None and not torch.cuda.is_available()
        with saved_on_cuda(device) if simulate else contextlib.nullcontext():
            module.save_checkpoint(str(target))
    model = module.make_model() if hasattr(module, "make_model") else None
    return diagnose(target, model=model)


def _save_in_own_process(lab_file: Path, target: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.lab.ckpt_saver", str(lab_file), str(target)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang, far above the seconds it takes
    )
    assert done.returncode == 0 and target.is_file(), done.stderr[-2000:]


@pytest.mark.parametrize("case", lab_params(Depth.CKPT))
def test_buggy_is_flagged(case: LabCase, tmp_path: Path) -> None:
    assert_flagged(ckpt_report(case.buggy, tmp_path), case, Depth.CKPT, exact_lines=False)


@pytest.mark.parametrize("case", lab_params(Depth.CKPT))
def test_fixed_is_quiet(case: LabCase, tmp_path: Path) -> None:
    assert_quiet(ckpt_report(case.fixed, tmp_path), case)
