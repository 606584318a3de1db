"""The findings of the cross-rank checks: what the ranks' numbers mean, in words.

Pure functions from measured facts to :class:`~torchdoctor.findings.Finding`; the
detector (:mod:`torchdoctor.distributed.detectors`) decides when they apply.
"""

from __future__ import annotations

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.rules.registry import finding

__all__ = [
    "epoch_replayed",
    "find_unused_without_unused",
    "same_batches",
    "tensors_differ",
    "uneven_batches",
]

_NAMES_SHOWN = 3


def _names(differing: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in differing[:_NAMES_SHOWN]) or "some tensors"
    more = len(differing) - _NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def tensors_differ(
    kind: str, step: int, differing: list[str], where: Location, world: int, beside: bool = False
) -> Finding:
    """TD811 (``kind="grads"``) or TD810 (``"params"``, ``"buffers"``); ``beside``: the
    differing parameters are stepped by the optimizer outside any DDP module."""
    names = _names(differing)
    evidence = {"step": step, "differing": differing[:20], "world_size": world}
    if kind == "grads":
        return finding(
            "TD811",
            f"After backward at step {step}, the DDP model's gradients differ across ranks "
            f"({names}): DDP did not all-reduce them, so each rank trains its own copy of "
            "the model",
            where,
            Depth.RUN,
            evidence=evidence,
            fix_hint="Call the DDP wrapper (`ddp_model(x)`), never `ddp_model.module(x)`, "
            "in the training forward, and cast or move the model before wrapping it.",
        )
    if kind == "buffers":
        return finding(
            "TD810",
            f"Buffers of the DDP model differ across ranks at step {step} ({names}): DDP was "
            "built with `broadcast_buffers=False`, so each rank keeps its own running "
            "statistics and evaluates differently",
            where,
            Depth.RUN,
            evidence=evidence,
            fix_hint="Keep `broadcast_buffers=True`, or convert BatchNorm layers with "
            "`nn.SyncBatchNorm.convert_sync_batchnorm(model)` before wrapping.",
        )
    if beside:
        return finding(
            "TD810",
            f"Tensors that the optimizer steps outside any DDP module differ across ranks at "
            f"step {step} ({names}), although every rank held them identical at the start "
            "and computed the same step: their gradients are not reduced (or are modified) "
            "alike on every rank, so the replicas diverged",
            where,
            Depth.RUN,
            evidence={**evidence, "outside_ddp": True},
            fix_hint="Reduce the gradients of every replicated tensor on every rank (wrap "
            "the module that holds them in DDP, or all-reduce their gradients yourself), "
            "and apply clipping or scaling identically on every rank.",
        )
    return finding(
        "TD810",
        f"Parameters of the DDP model differ across ranks at step {step} ({names}): the "
        "replicas diverged, so the ranks no longer train one model",
        where,
        Depth.RUN,
        evidence=evidence,
        fix_hint="Update parameters only through the optimizer after DDP's backward; do "
        "not modify, recast or replace them on one rank after wrapping.",
    )


def same_batches(world: int, where: Location) -> Finding:
    """TD806 at run depth: every rank's first batch of the epoch is the same."""
    return finding(
        "TD806",
        f"All {world} ranks drew the same first batch (identical contents): the DataLoader "
        f"does not shard the data, so every rank trains on the same samples and {world} "
        "processes do the work of one",
        where,
        Depth.RUN,
        evidence={"world_size": world},
        fix_hint="Give the DataLoader `sampler=DistributedSampler(dataset)` (and "
        "`shuffle=False`), and call `sampler.set_epoch(epoch)` every epoch.",
    )


def uneven_batches(low: int, high: int, where: Location) -> Finding:
    """TD812: the ranks' loaders have different lengths."""
    return finding(
        "TD812",
        f"Ranks iterate different numbers of batches per epoch ({low} on one rank, {high} "
        "on another): the ranks with more batches will wait forever in a collective (DDP's "
        "gradient all-reduce) that the others never call",
        where,
        Depth.RUN,
        evidence={"fewest_batches": low, "most_batches": high},
        fix_hint="Shard with `DistributedSampler` (it pads every rank to the same length), "
        "or use `drop_last=True`; with uneven inputs on purpose, wrap the loop in "
        "`ddp_model.join()`.",
    )


def epoch_replayed(epoch: int, where: Location) -> Finding:
    """TD801 at run depth: a new epoch started with the sampler's epoch unchanged."""
    return finding(
        "TD801",
        f"A new epoch of the `DistributedSampler` started with its epoch still {epoch}: "
        "`set_epoch()` was never called, so this epoch replays the previous epoch's order "
        "exactly, on every rank",
        where,
        Depth.RUN,
        evidence={"sampler_epoch": epoch},
        fix_hint="Call `sampler.set_epoch(epoch)` at the start of every epoch, before "
        "iterating the DataLoader.",
    )


def find_unused_without_unused(checks: int, where: Location) -> Finding:
    """TD803 at run depth: ``find_unused_parameters=True`` and every parameter used."""
    return finding(
        "TD803",
        "DDP is built with `find_unused_parameters=True`, but every parameter received a "
        f"gradient at each of {checks} checked steps: the extra traversal of the autograd "
        "graph on every step buys nothing",
        where,
        Depth.RUN,
        evidence={"checked_steps": checks},
        fix_hint="Drop `find_unused_parameters=True` (the default is False).",
    )
