"""Runs the probes: selection, isolation, state restore, timings.

Each probe runs through :func:`torchdoctor._kernel.run_detector`: a probe that raises (a
bug of ours) becomes one ``TD001`` finding naming it, and the others carry on. The user's
model, optimizer and RNGs are restored after every probe and once more at the end, whether
the check returns or raises.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from torchdoctor.__about__ import __version__
from torchdoctor._kernel import Reporter, run_detector, wanted
from torchdoctor.errors import UsageError
from torchdoctor.findings import Depth, Finding, Location, Report
from torchdoctor.preflight.budget import probe_budget
from torchdoctor.preflight.failures import SharedWorkFailed, is_out_of_memory, user_code_error
from torchdoctor.preflight.registry import ProbeInfo
from torchdoctor.preflight.snapshot import Snapshot
from torchdoctor.preflight.threads import fastest_thread_count
from torchdoctor.progress import advance

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

__all__ = ["run_probes", "user_probes"]


def run_probes(ctx: CheckContext, probes: list[ProbeInfo]) -> Report:
    """Run every enabled probe on ``ctx`` and collect their findings into a report.

    Raises:
        UserCodeError: the user's code raised for a reason no rule explains, or memory ran
            out; the user's state is restored first.
        KeyboardInterrupt: passed through, after restoring the user's state.
    """
    report = Report(
        tool_version=__version__,
        command="check",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    snapshot = Snapshot(_watched_modules(ctx), ctx.optimizer)
    started = time.perf_counter()
    explained: list[Finding] = []
    timings: dict[str, float] = {}
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            # The user's code warns during our passes as it will in training; keep those
            # warnings as facts instead of printing them into the report's output.
            warnings.simplefilter("always")
            _run_all(ctx, probes, report, snapshot, explained, timings)
        for item in explained:
            if item.code not in report.codes() and ctx.enabled(item.code):
                report.add(item)
    finally:
        ctx.close()
        snapshot.restore()
    report.facts.update(_facts(ctx, timings, time.perf_counter() - started))
    report.series.update(ctx.curves)  # the probes' training curves, for the HTML plots
    if caught:
        report.facts["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    return report


def user_probes(probes: Iterable[Any]) -> list[ProbeInfo]:
    """The user's own probes (:class:`torchdoctor.custom.Probe` instances) as
    :class:`ProbeInfo` records, their custom rules declared.

    Raises:
        UsageError: not a ``Probe`` instance, or no rule declared.
    """
    from torchdoctor.custom import Probe, declared_codes

    infos = []
    for probe in probes:
        if not isinstance(probe, Probe):
            raise UsageError(
                f"probes must be instances of torchdoctor.custom.Probe, got "
                f"{type(probe).__name__}"
                + (" (a class: pass an instance)" if isinstance(probe, type) else "")
            )
        codes = declared_codes(probe, Depth.CHECK)
        run = functools.partial(_run_user_probe, probe)
        run.__name__ = type(probe).__name__  # type: ignore[attr-defined]
        run.__module__ = type(probe).__module__
        infos.append(ProbeInfo(codes, run))
    return infos


def _run_user_probe(probe: Any, ctx: CheckContext, out: Reporter) -> None:
    # A user's probe returns its findings (the public ``Probe.check``); they are emitted.
    for item in probe.check(ctx) or ():
        out.emit(item)


def _watched_modules(ctx: CheckContext) -> Any:
    """The model, plus the loss function when it is a module (its tensors, its mode and
    its plain attributes, such as a call counter, are the user's too)."""
    import torch

    if isinstance(ctx.loss_fn, torch.nn.Module):
        return torch.nn.ModuleList([ctx.model, ctx.loss_fn])
    return ctx.model


def _run_all(
    ctx: CheckContext,
    probes: list[ProbeInfo],
    report: Report,
    snapshot: Snapshot,
    explained: list[Finding],
    timings: dict[str, float],
) -> None:
    import torch

    with probe_budget("thread timing"):
        threads = fastest_thread_count(ctx)
    snapshot.restore()
    report.facts["threads"] = threads
    for index, info in enumerate(probes):
        advance("check", info.name, index, len(probes))
        if not wanted(info.codes, ctx.selection):
            continue
        torch.set_num_threads(threads)  # the snapshot puts the user's count back after
        begin = time.perf_counter()
        try:
            with probe_budget(info.name):  # a wall-clock budget: the user's code may hang
                report.extend(_run_one(info, ctx, explained))
        finally:
            snapshot.restore()
            timings[info.name] = round(time.perf_counter() - begin, 4)
    advance("check", "", len(probes), len(probes))


def _run_one(info: ProbeInfo, ctx: CheckContext, explained: list[Finding]) -> list[Finding]:
    def on_error(error: Exception) -> list[Finding] | None:
        if isinstance(error, SharedWorkFailed):
            # Shared work (the forward every probe needs) failed for a reason a rule
            # explains: the explanation is reported once, after every probe ran.
            explained.append(error.finding)
            return []
        if is_out_of_memory(error):
            raise user_code_error(f"probe {info.name}", error) from error
        return None

    return run_detector(
        f"probe {info.name}",
        info.codes,
        lambda out: info.function(ctx, out),
        Depth.CHECK,
        Location(object=f"probe {info.name}"),
        ctx.selection,
        on_error=on_error,
    )


def _facts(ctx: CheckContext, timings: dict[str, float], seconds: float) -> dict[str, object]:
    facts: dict[str, object] = {
        "seconds": round(seconds, 4),
        "probe_seconds": timings,
        "seed": ctx.seed,
        "model": type(ctx.model).__name__,
    }
    if "device" in ctx.__dict__:
        facts["device"] = str(ctx.device)
    if "loss_spec" in ctx.__dict__:
        facts["loss"] = ctx.loss_spec.name
    if "batch" in ctx.__dict__:
        from torchdoctor.preflight.batch import iter_tensors

        facts["batch"] = {
            name: list(t.shape)
            for name, t in (
                *iter_tensors(ctx.batch.inputs, "inputs"),
                *iter_tensors(ctx.batch.targets, "targets"),
            )
        }
    if "train_pass" in ctx.__dict__:  # gradient norm per parameter of the one training pass
        facts["layer_grad_norms"] = {
            name: float(f"{float(grad.float().norm()):.4g}")
            for name, grad in ctx.train_pass.gradients.items()
            if grad is not None and not grad.is_sparse
        }
    return facts
