"""Reproducibility: two identically seeded training steps must give the same losses (TD907).

Two fresh copies of the model and optimizer are seeded the way a training script seeds
itself (``torch``, CUDA, numpy's global RNG and :mod:`random`), take one step on the batch
and compute the loss again. Any difference comes from randomness those seeds do not
control, from state outside the copies, or from non-deterministic kernels.
"""

from __future__ import annotations

import random
import sys
from typing import TYPE_CHECKING

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Finding, Location, Severity
from torchdoctor.preflight.registry import probe
from torchdoctor.preflight.training import (
    CopyUnavailable,
    copy_for_training,
    forward_loss,
    train_step,
)
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

# Differences below this (relative), seen only after a backward, are the usual rounding of
# atomic-add kernels on GPUs: information, unless the user asked for determinism.
KERNEL_NOISE = 1e-3


def seed_everything(seed: int) -> None:
    """Seed what a training script seeds: torch (CPU and every CUDA device), numpy's
    global RNG when numpy is imported, and :mod:`random`."""
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


def _seeded_run(ctx: CheckContext) -> tuple[float, float]:
    training = copy_for_training(ctx)
    seed_everything(ctx.seed)
    first = train_step(training, ctx.batch, None)
    return first, forward_loss(training, ctx.batch)


def _same(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)  # NaN equals NaN here


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


@probe("TD907")
def nondeterministic_step(ctx: CheckContext, out: Reporter) -> None:
    """Seed, step and measure twice on fresh copies; report losses that differ."""
    ctx.train_pass.require_loss()
    try:
        first_run, second_run = _seeded_run(ctx), _seeded_run(ctx)
    except CopyUnavailable:
        return
    (a0, a1), (b0, b1) = first_run, second_run
    evidence = {"seed": ctx.seed, "first_losses": [a0, b0], "after_step_losses": [a1, b1]}
    if not _same(a0, b0):
        out.emit(
            finding(
                "TD907",
                f"Two copies seeded identically (torch.manual_seed({ctx.seed}), numpy, "
                f"random) give different losses at the first forward: {a0:.10g} vs {b0:.10g}. "
                "The forward draws randomness those seeds do not control (a fresh "
                "`np.random.default_rng()`, `random.SystemRandom`, a `torch.Generator` seeded "
                "from the clock) or reads state that changes between calls (a global counter).",
                Location(object=ctx.name("")),
                Depth.CHECK,
                fix_hint="Draw random numbers from torch's global generator (`torch.randn_like`) "
                "or from generators seeded from the run's seed, and keep changing state "
                "inside the model.",
                evidence={**evidence, "relative_difference": _relative(a0, b0)},
            )
        )
        return
    if _same(a1, b1):
        return
    out.emit(_kernel_finding(ctx, a0, a1, b1, evidence))


def _kernel_finding(
    ctx: CheckContext, first: float, a1: float, b1: float, evidence: dict[str, object]
) -> Finding:
    import torch

    difference = _relative(a1, b1)
    quiet = difference < KERNEL_NOISE and not torch.are_deterministic_algorithms_enabled()
    return finding(
        "TD907",
        f"Two copies seeded identically agree at the first forward ({first:.10g}) "
        f"but differ after one backward and optimizer step: {a1:.10g} vs {b1:.10g} "
        f"(relative {difference:.2g}). Kernels in the backward or the optimizer are not "
        "deterministic (atomic adds on the GPU: index_add_, scatter_add_, embedding "
        "backward), so runs drift apart a little more every step.",
        Location(object=ctx.name("")),
        Depth.CHECK,
        severity=Severity.INFO if quiet else None,
        fix_hint="Call `torch.use_deterministic_algorithms(True)` (with "
        "`CUBLAS_WORKSPACE_CONFIG=:4096:8` on CUDA) when runs must repeat exactly.",
        evidence={**evidence, "relative_difference": difference},
    )
