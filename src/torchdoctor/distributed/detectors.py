"""Cross-rank runtime detectors: what only shows when ranks are compared.

At a few optimizer steps (1, 2, 4, ..., 32, then every ``TORCHDOCTOR_DIST_EVERY``, default
64) of the optimizer that updates a DDP model, every rank computes per-tensor float64 sums
of the DDP model's gradients (final, just before ``step()``), of its parameters (as the
previous step left them) and, when DDP does not broadcast them, of its floating buffers;
plus a fingerprint of the epoch's first batch and the number of batches per epoch. One
fixed-size exchange on torchdoctor's own gloo group (:mod:`torchdoctor.distributed.exchange`)
starts in the background and is collected at the next check's step, so no rank waits for
a slower one; the names of differing tensors are exchanged only after a mismatch, at that
same step on every rank.

Rules: TD810 replicas diverged (parameters or buffers), TD811 gradients not synchronised,
TD812 ranks iterate different numbers of batches, TD806 every rank draws the same batches
(once its catalogue entry has the run depth), TD801 the sampler replays its order and TD803
``find_unused_parameters`` with every parameter used (both rank-local).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchdoctor.distributed import checkpoints as checkpoints  # registers TD804 (run)
from torchdoctor.distributed import clipping as clipping  # registers TD814 (run)
from torchdoctor.distributed import verdicts
from torchdoctor.distributed.exchange import Exchange, Extremes, Pending, make_exchange
from torchdoctor.distributed.hang import HANG_DIR_ENV, Watchdog
from torchdoctor.distributed.replicas import replicated_outside, tensor_sums
from torchdoctor.distributed.tracking import (
    Patches,
    after_call,
    batch_fingerprint,
    before_call,
    loader_iterator_classes,
)
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import get_rule
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    CallSite,
    ModelInfo,
    MonitorView,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
)

__all__ = ["CrossRankChecks", "check_every", "is_due"]

# TD806 (every rank draws the same batches) is reported at run depth once its catalogue
# entry lists the run depth (its lab pair must then run as a 2-process job).
_RUN_DEPTH_OF_TD806 = ("TD806",) if Depth.RUN in get_rule("TD806").depths else ()
_EARLY_CHECKS = frozenset({1, 2, 4, 8, 16, 32})
_KINDS = ("grads", "params", "buffers")
# The exchanged vector: a fingerprint and a tensor count per kind, then the batch facts.
_BATCH, _HAS_BATCH, _BATCHES = 6, 7, 8


def is_due(step: int, every: int) -> bool:
    """Whether the ranks compare themselves at ``step``: a function of the step alone, so
    that every rank exchanges at the same steps."""
    return step in _EARLY_CHECKS or step % every == 0


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
        self.params = [(n, p) for n, p in ddp.module.named_parameters() if p.requires_grad]
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

    def joined(self) -> bool:
        """Whether the model runs inside ``model.join()`` (uneven inputs handled)."""
        config = getattr(self.ref(), "_join_config", None)
        return bool(getattr(config, "enable", False))


@dataclass
class _Check:
    """One check under way: what was sent, to judge and name tensors once it completes."""

    step: int
    pending: Pending
    ddps: list[_Ddp]
    where: Location | None
    names: dict[str, list[str]]
    sums: dict[str, list[float]]
    batch: tuple[float, CallSite | None, int] | None


@detector(
    "TD801", "TD803", "TD810", "TD811", "TD812", "TD813", *_RUN_DEPTH_OF_TD806, depth=Depth.RUN
)
class CrossRankChecks(RuntimeDetector):
    """Compares the ranks of a DDP job at a few steps; watches samplers and DDP options."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._exchange: Exchange | None = None
        self._ddps: list[_Ddp] = []
        self._checked_optimizer: int | None = None
        self._error: BaseException | None = None
        self._epoch_starts: dict[int, int] = {}  # id(sampler) -> its epoch at the last start
        self._first_batch: tuple[float, CallSite | None, int] | None = None
        self._reported: set[str] = set()
        self._every = check_every()
        self._pending: _Check | None = None
        self._watchdog: Watchdog | None = None
        self._busy_s = 0.0  # time spent in the checks: their whole cost to the run
        self._outside: list[tuple[str, Any]] | None = None  # stepped replicas beside DDP
        self._loss: Any = None  # the last loss, detached, while a job is watched

    # -- set-up --------------------------------------------------------------------------

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        import torch

        self._torch = torch
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available():
            self._wrap_group_calls(dist)
            from torch.nn.parallel import DistributedDataParallel

            self._patches.wrap(
                DistributedDataParallel,
                "__init__",
                after_call(self._patches, self._ddp_built, self._failed),
            )
            if dist.is_initialized():  # watch() inside a job whose group exists
                self._start_exchange()
                self._find_existing_ddps(DistributedDataParallel)
        for iterator in loader_iterator_classes():
            self._patches.wrap(
                iterator, "_next_data", after_call(self._patches, self._next_data, self._failed)
            )
        if self._exchange is None and not self._ddps:
            # A single process: nothing to compare at each step until a process group or
            # a DDP model appears (_start_exchange, _watch_ddp).
            self.unsubscribe("on_backward", "on_step_begin")

    def _wrap_group_calls(self, dist: Any) -> None:
        c10d = getattr(dist, "distributed_c10d", None)
        for name, make in (
            ("init_process_group", after_call(self._patches, self._group_ready, self._failed)),
            ("destroy_process_group", before_call(self._patches, self._collect_all, self._failed)),
        ):
            original = getattr(dist, name, None)
            self._patches.wrap(dist, name, make)
            if c10d is not None and getattr(c10d, name, None) is original:
                self._patches.wrap(c10d, name, make)

    def _failed(self, error: BaseException) -> None:
        self._error = error

    def _group_ready(self, result: Any, *args: Any, **kwargs: Any) -> None:
        self._start_exchange()

    def _start_exchange(self) -> None:
        if self._exchange is not None:
            return
        self._exchange = make_exchange(self._torch)
        if self._exchange is not None:
            self.resubscribe("on_backward", "on_step_begin")
            self.monitor.set_fact("rank", self._exchange.rank)
            self.monitor.set_fact("world_size", self._exchange.world_size)
            folder = os.environ.get(HANG_DIR_ENV) or os.path.join(
                tempfile.gettempdir(), "torchdoctor-stacks"
            )
            self._watchdog = Watchdog(self._exchange.rank, Path(folder), self._frame_site)

    def _frame_site(self, frame: Any) -> tuple[str, int] | None:
        site = self.monitor.user_site(frame)
        return (site.path, site.line) if site is not None and site.user else None

    def _ddp_built(self, result: Any, ddp: Any, *args: Any, **kwargs: Any) -> None:
        if not any(d.ref() is ddp for d in self._ddps):
            self._watch_ddp(_Ddp(ddp, self.monitor.user_site()))

    def _watch_ddp(self, ddp: _Ddp) -> None:
        self._ddps.append(ddp)
        self.resubscribe("on_backward", "on_step_begin")

    def _find_existing_ddps(self, ddp_class: type) -> None:
        """DDP models built before the watch started (once, when it starts in a job)."""
        import gc

        for candidate in gc.get_objects():
            # type(), not isinstance(): DDP's ABC base reads `__class__` of every object,
            # and some (torch.distributed.reduce_op) warn when an attribute is read
            if issubclass(type(candidate), ddp_class) and not any(
                d.ref() is candidate for d in self._ddps
            ):
                self._watch_ddp(_Ddp(candidate, None))

    def on_model(self, model: ModelInfo) -> None:
        from torch.nn.parallel import DistributedDataParallel

        if isinstance(model.module, DistributedDataParallel) and not any(
            d.ref() is model.module for d in self._ddps
        ):
            self._watch_ddp(_Ddp(model.module, None))

    # -- epochs and batches --------------------------------------------------------------

    def _next_data(self, batch: Any, iterator: Any, *args: Any, **kwargs: Any) -> None:
        if self._watchdog is not None:
            self._watchdog.progress()  # a batch is progress too (a long validation pass)
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
        self.emit(verdicts.epoch_replayed(epoch, _place(site, "DistributedSampler")))

    # -- the checks ----------------------------------------------------------------------

    def on_backward(self, event: BackwardEvent) -> None:
        if self._exchange is not None and self._outside is None:  # until the first check
            self._loss = event.loss.detach()

    def on_step_begin(self, event: StepEvent) -> None:
        if not self._is_checked(event):
            return
        step = event.step
        if self._watchdog is not None:
            self._watchdog.progress(step)
        if not is_due(step, self._every):
            return
        # Collected at the next check's step, never "as soon as it is done": the judging
        # may exchange the names of differing tensors, a blocking call that every rank must
        # make at the same point of the program. A rank that collected early would wait
        # there while the other rank went on into the user's next collective (DDP's
        # gradient all-reduce), and both would wait until the exchange timed out.
        if self._pending is not None:
            self._timed(self._collect)
        self._timed(self._check, step, event.optimizer)

    def _timed(self, function: Any, *args: Any) -> None:
        start = time.perf_counter()
        try:
            function(*args)
        finally:
            self._busy_s += time.perf_counter() - start

    def _is_checked(self, event: StepEvent) -> bool:
        if self._checked_optimizer is None:
            if self._exchange is None and not self._ddps:
                return False  # a single process with no DDP model: nothing to compare
            ddp_params = {id(p) for d in self._ddps if d.ref() is not None for _, p in d.params}
            if ddp_params and not any(id(p) in ddp_params for p in event.optimizer.params):
                return False
            if not ddp_params and self._exchange is None:
                return False
            self._checked_optimizer = id(event.optimizer.optimizer)
        return id(event.optimizer.optimizer) == self._checked_optimizer

    def _check(self, step: int, optimizer: OptimizerInfo) -> None:
        ddps = [d for d in self._ddps if d.ref() is not None]
        self._note_unused(ddps)
        exchange = self._exchange
        if exchange is None or not exchange.usable:
            return
        params = [p for d in ddps for p in d.params]
        if self._outside is None:  # the first check, on every rank: which replicas to add
            loss, self._loss = self._loss, None
            value = float(loss) if loss is not None and loss.numel() == 1 else None
            inside = {id(p) for _, p in params}
            self._outside = replicated_outside(exchange, optimizer, inside, value, self._torch)
        site = self.monitor.optimizer_site(optimizer.optimizer)
        tensors = {  # DDP reduces its own gradients only; replicas beside it are compared
            "grads": [(n, p.grad) for n, p in params if p.grad is not None],
            "params": params + self._outside,
            "buffers": [b for d in ddps for b in d.buffers],
        }
        names = {kind: [n for n, _ in tensors[kind]] for kind in _KINDS}
        sums = {kind: tensor_sums([t for _, t in tensors[kind]], self._torch) for kind in _KINDS}
        values = [0.0] * 9
        for index, kind in enumerate(_KINDS):
            values[2 * index] = _fingerprint(sums[kind])
            values[2 * index + 1] = len(sums[kind])
        batch = self._first_batch
        if batch is not None:
            values[_BATCH], values[_HAS_BATCH], values[_BATCHES] = batch[0], 1.0, batch[2]
        pending = exchange.start(values)
        if pending is None:
            self._exchange_failed(step)
            return
        where = site.location() if site is not None else None
        self._pending = _Check(step, pending, ddps, where, names, sums, batch)

    def _collect(self) -> None:
        check, self._pending = self._pending, None
        if check is None:
            return
        seen = check.pending.result()
        if seen is None:
            self._exchange_failed(check.step)
            return
        self._judge(seen, check)

    def _collect_all(self, group: Any = None, *args: Any, **kwargs: Any) -> None:
        """Before the user's groups go away (``destroy_process_group()``): finish the check
        under way, while torchdoctor's group still exists."""
        if group is not None:  # one subgroup of the user's goes, ours stays
            return
        self._timed(self._collect)
        if self._exchange is not None:
            self._record_exchange_facts()
            self._exchange.close()
            self._exchange = None

    def _judge(self, seen: Extremes, check: _Check) -> None:
        world = self._exchange.world_size if self._exchange else 0
        for index, kind in enumerate(_KINDS):
            same_count = seen.agree(2 * index + 1)
            if check.sums[kind] and same_count and not seen.agree(2 * index):
                if kind == "params" and "TD811" in self._reported:
                    continue  # the replicas diverged because gradients were not reduced
                self._report_tensors(kind, check, world)
        batch = check.batch
        if seen.low[_HAS_BATCH] == 1.0 and batch is not None:
            where = _place(batch[1], "DataLoader")
            if seen.agree(_BATCH) and _RUN_DEPTH_OF_TD806 and "TD806" not in self._reported:
                self._reported.add("TD806")
                self.emit(verdicts.same_batches(world, where))
            if (
                not seen.agree(_BATCHES)
                and "TD812" not in self._reported
                and not any(d.joined() for d in check.ddps)
            ):
                self._reported.add("TD812")
                low, high = int(seen.low[_BATCHES]), int(seen.high[_BATCHES])
                self.emit(verdicts.uneven_batches(low, high, where))

    def _report_tensors(self, kind: str, check: _Check, world: int) -> None:
        code = "TD811" if kind == "grads" else f"TD810:{kind}"
        if code in self._reported or self._exchange is None:
            return
        if not check.ddps and not (kind == "params" and self._outside):
            return
        self._reported.add(code.split(":")[0] if kind == "grads" else code)
        detail = self._exchange.extremes(check.sums[kind])
        names = check.names[kind]
        differing = [names[i] for i in detail.differing()] if detail else []
        first = differing[0] if differing else None
        if check.ddps:
            where = check.ddps[0].location(first)
        else:
            where = _place(None, first or "optimizer")
            if check.where is not None:
                where = dataclasses.replace(check.where, object=first)
        outside = {name for name, _ in self._outside or ()}
        beside = bool(differing) and all(name in outside for name in differing)
        self.emit(verdicts.tensors_differ(kind, check.step, differing, where, world, beside))

    def _exchange_failed(self, step: int) -> None:
        exchange = self._exchange
        if exchange is not None and exchange.failure is not None:
            self.monitor.set_fact(
                "cross_rank_checks_stopped", f"at step {step}: {exchange.failure}"
            )

    def _record_exchange_facts(self) -> None:
        if self._exchange is not None:
            self.monitor.set_fact("cross_rank_checks", self._exchange.rounds)
            self.monitor.set_fact("cross_rank_bytes", self._exchange.bytes_sent)
        self.monitor.set_fact("cross_rank_seconds", round(self._busy_s, 6))

    # -- unused parameters, and the end ----------------------------------------------------

    def _note_unused(self, ddps: Sequence[_Ddp]) -> None:
        for ddp in ddps:
            if ddp.find_unused:
                if all(p.grad is not None for _, p in ddp.params):
                    ddp.all_used_checks += 1
                else:
                    ddp.some_unused = True

    def on_finish(self, report: Report) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._exchange is not None:
            self._collect_all()
        self._patches.remove()
        if self._error is not None:
            raise self._error  # a wrapper's callback failed: reported once as TD001
        for ddp in self._ddps:
            if ddp.find_unused and not ddp.some_unused and ddp.all_used_checks >= 2:
                self.emit(verdicts.find_unused_without_unused(ddp.all_used_checks, ddp.location()))
        self._ddps.clear()


def _place(site: CallSite | None, obj: str) -> Location:
    return site.location(object=obj) if site is not None else Location(object=obj)


def _fingerprint(sums: Sequence[float]) -> float:
    """A weighted sum of per-tensor sums: equal on two ranks only when (almost surely)
    every tensor is; the weights make swapped tensors count."""
    count = len(sums)
    return sum(value * (1.0 + index / (count + 1)) for index, value in enumerate(sums))


def _length(iterator: Any) -> int:
    try:
        return len(iterator)
    except TypeError:
        return -1
