"""Cross-rank runtime detectors: what only shows when ranks are compared.

At a few optimizer steps (1, 2, 4, ..., 32, then every ``TORCHDOCTOR_DIST_EVERY``, default
64) of the optimizer that updates a DDP model, every rank computes cheap fingerprints (a
weighted sum of per-tensor float64 sums) of the DDP model's gradients (final, just before
``step()``), its parameters (as the previous step left them) and, when DDP does not
broadcast them, its floating buffers; plus the sample indices of the epoch's first batch
and the number of batches per epoch. One fixed-size exchange on torchdoctor's own gloo
group (:mod:`torchdoctor.distributed.exchange`) tells every rank whether they agree; the
names of the differing tensors are exchanged only after a mismatch.

Rules: TD810 replicas diverged (parameters or buffers), TD811 gradients not synchronised,
TD812 ranks iterate different numbers of batches, TD806 every rank draws the same
batches, TD801 the sampler replays its order (rank-local), TD803 ``find_unused_parameters``
with every parameter used (rank-local).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any

from torchdoctor.distributed.exchange import Exchange, Extremes, make_exchange
from torchdoctor.distributed.tracking import (
    Patches,
    after_call,
    batch_fingerprint,
    loader_iterator_classes,
)
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding, get_rule
from torchdoctor.runtime.detectors.base import (
    CallSite,
    ModelInfo,
    MonitorView,
    RuntimeDetector,
    StepEvent,
)

__all__ = ["CrossRankChecks"]

# TD806 (every rank draws the same batches) is reported at run depth once its catalogue
# entry lists the run depth (its lab pair must then run as a 2-process job).
_RUN_DEPTH_OF_TD806 = ("TD806",) if Depth.RUN in get_rule("TD806").depths else ()
_EARLY_CHECKS = frozenset({1, 2, 4, 8, 16, 32})
_NAMES_SHOWN = 3
# Layout of the exchanged vector: sizes first, so details are exchanged only when every
# rank has the same tensors.
_GRADS, _PARAMS, _BUFFERS, _N_PARAMS, _N_BUFFERS, _BATCH, _HAS_BATCH, _BATCHES = range(8)


def check_every() -> int:
    """Steps between cross-rank checks after the early ones (``TORCHDOCTOR_DIST_EVERY``)."""
    try:
        return max(1, int(os.environ.get("TORCHDOCTOR_DIST_EVERY", "64")))
    except ValueError:
        return 64


class _Ddp:
    """A DDP model seen in this run, and the user's line that wrapped it."""

    def __init__(self, ddp: Any, site: CallSite | None) -> None:
        self.ref = weakref.ref(ddp)
        self.site = site
        self.params: list[tuple[str, Any]] = [
            (n, p) for n, p in ddp.module.named_parameters() if p.requires_grad
        ]
        self.buffers: list[tuple[str, Any]] = []
        if not getattr(ddp, "broadcast_buffers", True):
            self.buffers = [(n, b) for n, b in ddp.module.named_buffers() if b.is_floating_point()]
        self.find_unused = bool(getattr(ddp, "find_unused_parameters", False))
        self.all_used_checks = 0
        self.some_unused = False

    def location(self, obj: str | None = None) -> Location:
        if self.site is not None:
            return self.site.location(object=obj)
        return Location(object=obj or "DistributedDataParallel")


@detector("TD801", "TD803", "TD810", "TD811", "TD812", *_RUN_DEPTH_OF_TD806, depth=Depth.RUN)
class CrossRankChecks(RuntimeDetector):
    """Compares the ranks of a DDP job at a few steps; watches samplers and DDP options."""

    def __init__(self) -> None:
        self._patches = Patches()
        self._exchange: Exchange | None = None
        self._ddps: list[_Ddp] = []
        self._checked_optimizer: int | None = None
        self._error: BaseException | None = None
        self._epoch_starts: dict[int, int] = {}  # id(sampler) -> its epoch at the last start
        self._first_batch: tuple[float, CallSite | None, int] | None = None
        self._reported: set[str] = set()
        self._every = check_every()
        self._checks = 0

    # -- set-up --------------------------------------------------------------------------

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        self._torch = torch
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available():
            self._wrap_init(dist)
            from torch.nn.parallel import DistributedDataParallel

            self._patches.wrap(
                DistributedDataParallel,
                "__init__",
                after_call(self._patches, self._ddp_built, self._failed),
            )
            if dist.is_initialized():  # watch() inside a job whose group exists
                self._start_exchange()
        for iterator in loader_iterator_classes():
            self._patches.wrap(
                iterator, "_next_data", after_call(self._patches, self._next_data, self._failed)
            )

    def _wrap_init(self, dist: Any) -> None:
        c10d = getattr(dist, "distributed_c10d", None)
        original = dist.init_process_group
        make = after_call(self._patches, self._group_ready, self._failed)
        self._patches.wrap(dist, "init_process_group", make)
        if c10d is not None and getattr(c10d, "init_process_group", None) is original:
            self._patches.wrap(c10d, "init_process_group", make)

    def _failed(self, error: BaseException) -> None:
        self._error = error

    def _group_ready(self, result: Any, *args: Any, **kwargs: Any) -> None:
        self._start_exchange()

    def _start_exchange(self) -> None:
        if self._exchange is not None:
            return
        self._exchange = make_exchange(self._torch)
        if self._exchange is not None:
            self.monitor.set_fact("rank", self._exchange.rank)
            self.monitor.set_fact("world_size", self._exchange.world_size)

    def _ddp_built(self, result: Any, ddp: Any, *args: Any, **kwargs: Any) -> None:
        if not any(d.ref() is ddp for d in self._ddps):
            self._ddps.append(_Ddp(ddp, self.monitor.user_site()))

    def on_model(self, model: ModelInfo) -> None:
        from torch.nn.parallel import DistributedDataParallel

        if isinstance(model.module, DistributedDataParallel) and not any(
            d.ref() is model.module for d in self._ddps
        ):
            self._ddps.append(_Ddp(model.module, None))

    # -- epochs and batches --------------------------------------------------------------

    def _next_data(self, batch: Any, iterator: Any, *args: Any, **kwargs: Any) -> None:
        epoch = getattr(iterator, "_sampler_iter", None)
        if getattr(iterator, "_torchdoctor_epoch", None) is epoch:
            return
        iterator._torchdoctor_epoch = epoch  # the first batch of this epoch
        site = self.monitor.user_site()
        fingerprint = batch_fingerprint(batch, self._torch)
        if fingerprint is not None:
            self._first_batch = (fingerprint, site, _length(iterator))
        sampler = getattr(getattr(iterator, "_index_sampler", None), "sampler", None)
        self._epoch_started(sampler, site)

    def _epoch_started(self, sampler: Any, site: CallSite | None) -> None:
        from torch.utils.data.distributed import DistributedSampler

        if not isinstance(sampler, DistributedSampler) or not getattr(sampler, "shuffle", 0):
            return
        epoch = int(getattr(sampler, "epoch", 0))
        previous = self._epoch_starts.get(id(sampler))
        self._epoch_starts[id(sampler)] = epoch
        if previous is None or previous != epoch or "TD801" in self._reported:
            return
        self._reported.add("TD801")
        where = (
            site.location(object="DistributedSampler")
            if site
            else Location(object="DistributedSampler")
        )
        self.emit(
            finding(
                "TD801",
                f"A new epoch of the `DistributedSampler` started with its epoch still {epoch}: "
                "`set_epoch()` was never called, so this epoch replays the previous epoch's "
                "order exactly, on every rank",
                where,
                Depth.RUN,
                fix_hint="Call `sampler.set_epoch(epoch)` at the start of every epoch, before "
                "iterating the DataLoader.",
                evidence={"sampler_epoch": epoch},
            )
        )

    # -- the checks ----------------------------------------------------------------------

    def on_step_begin(self, event: StepEvent) -> None:
        if self._error is not None:
            raise self._error
        if not self._is_checked(event):
            return
        step = event.step
        if step not in _EARLY_CHECKS and step % self._every:
            return
        self._checks += 1
        ddps = [d for d in self._ddps if d.ref() is not None]
        self._note_unused(ddps)
        exchange = self._exchange
        if exchange is None or not exchange.usable:
            return
        params = [p for d in ddps for p in d.params]
        buffers = [b for d in ddps for b in d.buffers]
        grads = [(n, p.grad) for n, p in params if p.grad is not None]
        values = [0.0] * 8
        values[_GRADS] = _fingerprint([g for _, g in grads], self._torch)
        values[_PARAMS] = _fingerprint([p for _, p in params], self._torch)
        values[_BUFFERS] = _fingerprint([b for _, b in buffers], self._torch)
        values[_N_PARAMS], values[_N_BUFFERS] = len(grads) * 1e6 + len(params), len(buffers)
        if self._first_batch is not None:
            values[_BATCH], values[_HAS_BATCH] = self._first_batch[0], 1.0
            values[_BATCHES] = self._first_batch[2]
        else:
            values[_BATCHES] = -1.0
        seen = exchange.extremes(values)
        if seen is None:
            self._exchange_failed(step)
            return
        self._judge(seen, step, ddps, grads, params, buffers)

    def _is_checked(self, event: StepEvent) -> bool:
        if self._checked_optimizer is None:
            ddp_params = {id(p) for d in self._ddps if d.ref() is not None for _, p in d.params}
            if ddp_params and not any(id(p) in ddp_params for p in event.optimizer.params):
                return False
            if not ddp_params and self._exchange is None:
                return False
            self._checked_optimizer = id(event.optimizer.optimizer)
        return id(event.optimizer.optimizer) == self._checked_optimizer

    def _judge(
        self,
        seen: Extremes,
        step: int,
        ddps: list[_Ddp],
        grads: list[tuple[str, Any]],
        params: list[tuple[str, Any]],
        buffers: list[tuple[str, Any]],
    ) -> None:
        same_tensors = seen.agree(_N_PARAMS) and seen.agree(_N_BUFFERS)
        world = self._exchange.world_size if self._exchange else 0
        if grads and not seen.agree(_GRADS) and same_tensors:
            self._report_tensors("TD811", step, ddps, grads, world)
        if (
            params
            and not seen.agree(_PARAMS)
            and same_tensors
            and "TD811:tensors" not in self._reported
        ):
            self._report_tensors("TD810", step, ddps, params, world)
        if buffers and not seen.agree(_BUFFERS) and same_tensors:
            self._report_tensors("TD810", step, ddps, buffers, world, buffers=True)
        if seen.low[_HAS_BATCH] == 1.0:
            if seen.agree(_BATCH):
                self._report_same_batches(world)
            if not seen.agree(_BATCHES) and not any(_joined(d) for d in ddps):
                self._report_uneven(seen)

    def _report_tensors(
        self,
        code: str,
        step: int,
        ddps: list[_Ddp],
        tensors: list[tuple[str, Any]],
        world: int,
        buffers: bool = False,
    ) -> None:
        key = f"{code}:{'buffers' if buffers else 'tensors'}"
        if key in self._reported or self._exchange is None:
            return
        self._reported.add(key)
        sums = [float(t.detach().sum(dtype=self._torch.float64)) for _, t in tensors]
        detail = self._exchange.extremes(sums)
        differing = [tensors[i][0] for i in detail.differing()] if detail else []
        names = ", ".join(f"`{n}`" for n in differing[:_NAMES_SHOWN]) or "some tensors"
        more = len(differing) - _NAMES_SHOWN
        names += f" and {more} more" if more > 0 else ""
        ddp = ddps[0]
        obj = differing[0] if differing else None
        evidence = {"step": step, "differing": differing[:20], "world_size": world}
        if code == "TD811":
            message = (
                f"After backward at step {step}, the DDP model's gradients differ "
                f"across ranks ({names}): DDP did not all-reduce them, so each rank "
                "trains its own copy of the model"
            )
            hint = (
                "Call the DDP wrapper (`ddp_model(x)`), never `ddp_model.module(x)`, in "
                "the training forward, and cast or move the model before wrapping it."
            )
        elif buffers:
            message = (
                f"Buffers of the DDP model differ across ranks at step {step} "
                f"({names}): DDP was built with `broadcast_buffers=False`, so each "
                "rank keeps its own running statistics and evaluates differently"
            )
            hint = (
                "Keep `broadcast_buffers=True`, or convert BatchNorm layers with "
                "`nn.SyncBatchNorm.convert_sync_batchnorm(model)` before wrapping."
            )
        else:
            message = (
                f"Parameters of the DDP model differ across ranks at step {step} "
                f"({names}): the replicas diverged, so the ranks no longer train "
                "one model"
            )
            hint = (
                "Update parameters only through the optimizer after DDP's backward; do "
                "not modify, recast or replace them on one rank after wrapping."
            )
        self.emit(
            finding(code, message, ddp.location(obj), Depth.RUN, fix_hint=hint, evidence=evidence)
        )

    def _report_same_batches(self, world: int) -> None:
        if not _RUN_DEPTH_OF_TD806 or "TD806" in self._reported or self._first_batch is None:
            return
        self._reported.add("TD806")
        site = self._first_batch[1]
        where = site.location(object="DataLoader") if site else Location(object="DataLoader")
        self.emit(
            finding(
                "TD806",
                f"All {world} ranks drew the same first batch (identical contents): the "
                "DataLoader does not shard the data, so every rank trains on the same samples "
                f"and {world} processes do the work of one",
                where,
                Depth.RUN,
                fix_hint="Give the DataLoader `sampler=DistributedSampler(dataset)` (and "
                "`shuffle=False`), and call `sampler.set_epoch(epoch)` every epoch.",
                evidence={"world_size": world},
            )
        )

    def _report_uneven(self, seen: Extremes) -> None:
        if "TD812" in self._reported or self._first_batch is None:
            return
        self._reported.add("TD812")
        low, high = int(seen.low[_BATCHES]), int(seen.high[_BATCHES])
        site = self._first_batch[1]
        where = site.location(object="DataLoader") if site else Location(object="DataLoader")
        self.emit(
            finding(
                "TD812",
                f"Ranks iterate different numbers of batches per epoch ({low} on one rank, "
                f"{high} on another): the ranks with more batches will wait forever in a "
                "collective (DDP's gradient all-reduce) that the others never call",
                where,
                Depth.RUN,
                fix_hint="Shard with `DistributedSampler` (it pads every rank to the same "
                "length), or use `drop_last=True`; with uneven inputs on purpose, wrap "
                "the loop in `ddp_model.join()`.",
                evidence={"fewest_batches": low, "most_batches": high},
            )
        )

    def _exchange_failed(self, step: int) -> None:
        exchange = self._exchange
        if exchange is not None and exchange.failure is not None:
            self.monitor.set_fact(
                "cross_rank_checks_stopped", f"at step {step}: {exchange.failure}"
            )

    # -- unused parameters ---------------------------------------------------------------

    def _note_unused(self, ddps: Sequence[_Ddp]) -> None:
        for ddp in ddps:
            if ddp.find_unused:
                if all(p.grad is not None for _, p in ddp.params):
                    ddp.all_used_checks += 1
                else:
                    ddp.some_unused = True

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        if self._exchange is not None:
            self.monitor.set_fact("cross_rank_checks", self._exchange.rounds)
            self.monitor.set_fact("cross_rank_bytes", self._exchange.bytes_sent)
            self._exchange.close()
        for ddp in self._ddps:
            if ddp.find_unused and not ddp.some_unused and ddp.all_used_checks >= 2:
                self.emit(
                    finding(
                        "TD803",
                        "DDP is built with `find_unused_parameters=True`, but every parameter "
                        f"received a gradient at each of {ddp.all_used_checks} checked steps: "
                        "the extra traversal of the autograd graph on every step buys nothing",
                        ddp.location(),
                        Depth.RUN,
                        fix_hint="Drop `find_unused_parameters=True` (the default is False).",
                        evidence={"checked_steps": ddp.all_used_checks},
                    )
                )
        self._ddps.clear()


def _fingerprint(tensors: Sequence[Any], torch: Any) -> float:
    """A weighted sum of per-tensor float64 sums: equal on two ranks only when (almost
    surely) every tensor is; the weights make swapped tensors count."""
    if not tensors:
        return 0.0
    with torch.no_grad():
        device = tensors[0].device
        sums = torch.stack([t.detach().sum(dtype=torch.float64).to(device) for t in tensors]).cpu()
        weights = 1.0 + torch.arange(len(tensors), dtype=torch.float64) / (len(tensors) + 1)
        return float((sums * weights).sum())


def _joined(ddp: _Ddp) -> bool:
    """Whether the DDP model runs inside ``model.join()`` (uneven inputs handled)."""
    config = getattr(ddp.ref(), "_join_config", None)
    return bool(getattr(config, "enable", False))


def _length(iterator: Any) -> int:
    try:
        return len(iterator)
    except TypeError:
        return -1
