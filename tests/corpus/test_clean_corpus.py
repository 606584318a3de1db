"""The clean corpus: correct training programs that every depth must stay quiet on.

``tests/corpus/clean/*.py`` are small, realistic, *correct* PyTorch training programs in
the many styles users write (gradient accumulation, GANs, AMP, closures, phase loops,
LoRA, DDP, ...). Each runs on a CPU in a few seconds with ``python file.py``. A warning or
an error from any depth on one of them is a false alarm:

* ``lint``: every file, no finding of warning or error severity (info is allowed, and
  printed with a failure);
* ``check``: every file that defines ``make()``, no warning or error;
* ``run``: the files of :data:`RUN_FILES` under the runtime monitor, no warning or error.

A false alarm that its detector's owner has not fixed yet is listed in
:data:`KNOWN_FALSE_ALARMS` and marked ``xfail(strict=True)``: the suite stays green, and
the test turns red as soon as the detector is fixed, so the entry gets removed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from torchdoctor.findings import Finding, Severity

CLEAN = Path(__file__).resolve().parent / "clean"
FILES = sorted(CLEAN.glob("*.py"))

# Scripts run under the monitor: the styles that runtime detectors are most likely to
# misread. Each runs in well under a second of CPU once torch is imported. A tuple adds
# command-line arguments, and gets its own test id.
RUN_FILES: tuple[str | tuple[str, tuple[str, ...]], ...] = (
    "accumulate_modulo.py",
    "accumulate_chunks.py",
    "zero_grad_at_end.py",
    "manual_sgd_update.py",
    "gan_two_optimizers.py",
    "wgan_n_critic.py",
    ("wgan_n_critic.py", ("--n-critic", "4")),
    ("wgan_n_critic.py", ("--gradient-penalty", "10", "--n-critic", "2")),
    "hinge_margin_svm.py",
    "tied_embedding_lm.py",
    "reinforce_policy_gradient.py",
    "focal_loss_imbalanced.py",
    "amp_grad_scaler.py",
    "lbfgs_closure.py",
    "phase_loop_tutorial.py",
    "ema_weights.py",
    "lora_finetune.py",
    "resnet_zero_init_residual.py",
    "vae_kl_warmup.py",
    "knowledge_distillation.py",
    "frozen_backbone_finetune.py",
    "ddp_sampler.py",
    "dataloader_workers.py",
    # Shapes seen in pytorch/examples and nanoGPT (issue #11): local losses, episodes,
    # manual updates, clipping, GAN loops, event handlers, closures, sparse graphs.
    "run_forward_forward_layers.py",
    "run_actor_critic_episodes.py",
    "run_reinforce_returns.py",
    "run_manual_sgd_data.py",
    "run_manual_no_grad_momentum.py",
    "run_clip_then_step.py",
    "run_dcgan_loop.py",
    "run_event_handlers.py",
    "run_lbfgs_sequence.py",
    "run_gcn_full_batch.py",
)
MAX_STEPS = 400  # a safety cap; no corpus script takes this many optimizer steps

# (depth, test id) -> why the finding is a false alarm. Remove an entry once its
# detector is fixed (the strict xfail then fails, saying so).
KNOWN_FALSE_ALARMS: dict[tuple[str, str], str] = {}

_ISOLATED_LINT_PATH = "{name}"  # lint as a user's file: TD102 skips anything under tests/


def _param(depth: str, test_id: str, *values: object) -> object:
    reason = KNOWN_FALSE_ALARMS.get((depth, test_id))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(*values, id=test_id, marks=marks)


def _loud(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity >= Severity.WARNING]


def _describe(findings: Iterable[Finding]) -> str:
    lines = []
    for f in findings:
        where = f"{f.location.path or ''}:{f.location.line or ''}".strip(":")
        obj = f" [{f.location.object}]" if f.location.object else ""
        lines.append(f"  {f.code} {f.severity.name.lower()} {where}{obj}: {f.message}")
    return "\n".join(lines) or "  (none)"


def _assert_quiet(findings: list[Finding], what: str) -> None:
    loud = _loud(findings)
    info = [f for f in findings if f.severity < Severity.WARNING]
    assert not loud, (
        f"{what} draws findings on correct code:\n{_describe(loud)}\n"
        f"info findings:\n{_describe(info)}"
    )


# --- lint ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [_param("lint", p.stem, p) for p in FILES])
def test_lint_is_quiet(path: Path) -> None:
    from torchdoctor.static import lint_source

    findings = lint_source(
        path.read_text(encoding="utf-8"), path=_ISOLATED_LINT_PATH.format(name=path.name)
    ).findings
    _assert_quiet(findings, f"lint of {path}")


# --- check --------------------------------------------------------------------------------


# Nothing is ignored: timing findings (TD409) keep a margin against a loaded machine, and
# a false alarm here is as much a bug as any other.
CHECK_IGNORE: tuple[str, ...] = ()


def _has_make(path: Path) -> bool:
    return re.search(r"^def make\(", path.read_text(encoding="utf-8"), re.MULTILINE) is not None


def _load(path: Path) -> ModuleType:
    """Import a corpus file as a fresh module (never as ``__main__``)."""
    name = f"corpus_clean_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.parametrize("path", [_param("check", p.stem, p) for p in FILES if _has_make(p)])
def test_check_is_quiet(path: Path) -> None:
    from torchdoctor.preflight.factory import CheckTarget

    with _isolated(path.parent):
        target = CheckTarget.from_result(_load(path).make(), f"{path.name}:make")
        report = target.check(ignore=CHECK_IGNORE)
    _assert_quiet(report.findings, f"check of {path.name}:make")


# --- run ----------------------------------------------------------------------------------


def _run_params() -> list[object]:
    params = []
    for entry in RUN_FILES:
        name, args = (entry, ()) if isinstance(entry, str) else entry
        test_id = Path(name).stem + "".join(a if a.startswith("-") else f"-{a}" for a in args)
        params.append(_param("run", test_id, CLEAN / name, args))
    return params


@contextlib.contextmanager
def _isolated(folder: Path) -> Iterator[None]:
    """Keep a corpus program's process-wide settings from leaking into the next test."""
    import torch

    rng, dtype = torch.get_rng_state(), torch.get_default_dtype()
    grad, anomaly = torch.is_grad_enabled(), torch.is_anomaly_enabled()
    threads, cwd = torch.get_num_threads(), os.getcwd()
    benchmark = torch.backends.cudnn.benchmark
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
        torch.backends.cudnn.benchmark = benchmark
        dynamo = getattr(torch, "_dynamo", None)
        if dynamo is not None and hasattr(dynamo, "reset"):
            dynamo.reset()


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.parametrize(("path", "args"), _run_params())
def test_run_is_quiet(path: Path, args: tuple[str, ...]) -> None:
    from torchdoctor.runtime.script import run_script

    with _isolated(path.parent):
        result = run_script(str(path), list(args), max_steps=MAX_STEPS, status=False)
    assert result.exit_status == 0, f"{path.name} failed:\n{_describe(result.report.findings)}"
    assert result.report.facts.get("steps") or result.report.facts.get("backward_calls"), (
        f"the monitor saw no training in {path.name}: {result.report.facts}"
    )
    _assert_quiet(result.report.findings, f"run of {path.name} {' '.join(args)}".strip())


def test_corpus_files_are_runnable_programs() -> None:
    """Every corpus file is a seeded script whose work sits under a main guard."""
    assert len(FILES) >= 15, "the corpus shrank"
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        assert 'if __name__ == "__main__":' in text, f"{path.name} has no main guard"
        assert "manual_seed(" in text, f"{path.name} is not seeded"
        assert text.startswith('"""'), f"{path.name} does not say what style it exercises"
