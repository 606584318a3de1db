"""Copies of the trained model that do not follow it (TD623), or that an optimizer trains
as well (TD624): EMA models, RL target networks, mean teachers.

A *copy* is a module made from a model an optimizer trains, during the run: by
``copy.deepcopy`` of it (recorded with the user's line, :mod:`torchdoctor.runtime.
model_copies`), or a watched model with the same parameter shapes whose values are
bit-identical to the trained model's at the first check (``Net()`` then
``load_state_dict(model.state_dict())``). On sampled steps (at most once per step) the
detector reads, for each copy and its original, the first values of their first
parameters (exact bits and float32), and the copy's write count (the sum of its
parameters' version counters: every in-place write adds to it, ``copy_``, ``lerp_``,
``load_state_dict``, an optimizer step). The comparisons are read back without a
synchronisation.

Policy (when unsure, quiet):

Thresholds are in :mod:`~torchdoctor.runtime.detectors.copy_verdicts`.

* *Never follows* (TD623): a copy that no optimizer holds is flagged when its values are
  exactly the same bits at every check over at least ``MIN_SPAN`` steps although its
  parameters were written in place in at least ``MIN_WRITES`` check intervals (the
  code runs an update on it: an EMA step with decay 1, a sync from the copy itself or
  from a stale state dict), while the original moved. A move (``.to()``, ``.float()``)
  replaces the storage without touching the version counters: not a write. A copy
  nothing writes is left alone: a frozen teacher, a reference model (DPO, a proximal
  term), a "best" snapshot, and a target network whose sync period is longer than the
  run all look like that. A slowly changing EMA is not "unchanged": bits are compared,
  not a threshold.
* *Drifts* (TD623): an EMA, a Polyak average or a synced target is an average of the
  original's past states, so its distance to the original stays within twice the
  largest norm the original had. A copy farther than ``DRIFT_BOUND`` times that norm,
  whose distance grew at each of the last ``DRIFT_RISES`` checks, is not
  averaging (an update that adds ``p`` without weighting it by ``1 - decay``).
* *Trained by an optimizer* (TD624): a copy held by the same optimizer as its original,
  which that optimizer's steps change (it gets gradients) at two sampled steps or more,
  and which something else also writes between steps (a sync or an EMA update) in two
  intervals or more. Ensembles and twin critics built by ``deepcopy`` are trained on
  purpose and written by nothing else; a copy in the optimizer that never gets a gradient
  is not changed by it, and both are quiet.

Cost: nothing per step; on sampled steps a pass over the copies' parameters' version
counters and two slices of at most 16 x 64 values per copy.
"""

from __future__ import annotations

import weakref
from typing import Any

from torchdoctor.findings import Depth, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.runtime.detectors.base import (
    CallSite,
    ModelInfo,
    MonitorView,
    OptimizerInfo,
    RuntimeDetector,
    StepEvent,
)
from torchdoctor.runtime.detectors.copy_verdicts import (
    Check,
    Pair,
    drifting,
    names_of,
    never_changed,
    trained,
)
from torchdoctor.runtime.model_copies import (
    CopyOrigins,
    fingerprint,
    parameters_of,
    restore_parametrized_copies,
    write_count,
)
from torchdoctor.runtime.patches import Patches

__all__ = ["ModelCopies"]


@detector("TD623", "TD624", depth=Depth.RUN)
class ModelCopies(RuntimeDetector):
    """Follows the copies of trained models: unchanged, drifting, or trained themselves."""

    sampled_hooks = frozenset({"on_step_begin", "on_step_end"})

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._error: BaseException | None = None
        self._pairs: dict[int, Pair] = {}  # id(copy) -> its pair
        self._checked = -1
        self._dirty = False  # models or optimizers came since the last look for copies
        self._made = 0  # deepcopies recorded at the last look
        self.origins: CopyOrigins | None = None

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        self.origins = CopyOrigins(monitor.user_site, lambda: monitor.global_step, self._failed)
        self.origins.install(self._patches)

    def _failed(self, error: BaseException) -> None:
        self._error = error

    # -- which modules are copies ----------------------------------------------------------

    def on_model(self, model: ModelInfo) -> None:
        self._dirty = True

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        self._dirty = True

    def _rediscover(self) -> None:
        """Look for copies again when models, optimizers or deepcopies came since the last
        look (two reads at each sampled step otherwise)."""
        made = self.origins.made if self.origins is not None else 0
        if not self._dirty and made == self._made:
            return
        self._dirty, self._made = False, made
        infos, models = self.monitor.optimizers, self.monitor.models
        # A copy needs two modules with parameters (a loss module is a watched model too).
        if made or sum(1 for m in models if m.inner._parameters or m.inner._modules) > 1:
            self._discover({id(p): info for info in reversed(infos) for p in info.params})

    def _discover(self, holders: dict[int, Any]) -> None:
        self._pairs = {k: v for k, v in self._pairs.items() if v.copy() is not None}
        order = [m.inner for m in self.monitor.models]
        params = {id(m): parameters_of(m) for m in order}
        trained = [m for m in order if any(id(p) in holders for p in params[id(m)])]
        for record in self.origins.records if self.origins is not None else ():
            made, source = record.copy(), record.source()
            if made is None or source is None or id(made) in self._pairs:
                continue
            if any(id(p) in holders for p in source.parameters()):
                self._add(made, source, record.site, True, holders)
        shapes = {key: [tuple(p.shape) for p in found] for key, found in params.items() if found}
        for index, module in enumerate(order):
            if id(module) in self._pairs or id(module) not in shapes:
                continue
            # A watched model shaped like a trained one (discovered before it, when both are
            # trained: the later one is the copy) may be a copy; the first check decides.
            twin = next(
                (
                    m
                    for m in trained
                    if m is not module
                    and shapes.get(id(m)) == shapes[id(module)]
                    and (module not in trained or order.index(m) < index)
                ),
                None,
            )
            if twin is not None:
                self._add(module, twin, None, False, holders)

    def _add(self, made: Any, source: Any, site: CallSite | None, known: bool, held: Any) -> None:
        copy_params, source_params = parameters_of(made), parameters_of(source)
        if not copy_params or [p.shape for p in copy_params] != [p.shape for p in source_params]:
            return
        pair = Pair(weakref.ref(made), weakref.ref(source), site, known, known)
        copy_holder = next((held[id(p)] for p in copy_params if id(p) in held), None)
        source_holder = next((held[id(p)] for p in source_params if id(p) in held), None)
        if copy_holder is not None:
            if copy_holder is not source_holder:
                return  # trained by an optimizer of its own: a model, not a copy
            pair.optimizer = copy_holder
        self._pairs[id(made)] = pair

    # -- sampled steps -----------------------------------------------------------------------

    def on_step_begin(self, event: StepEvent) -> None:
        if event.global_step != self._checked:
            self._checked = event.global_step
            self._rediscover()
            for pair in list(self._pairs.values()) if self._pairs else ():
                if not pair.rejected and pair.optimizer is None:
                    self._check(pair, event.global_step)
        for pair in self._pairs.values() if self._pairs else ():
            if _steps(pair, event) and not pair.rejected:
                self._begin(pair, event.step)

    def on_step_end(self, event: StepEvent) -> None:
        for pair in self._pairs.values() if self._pairs else ():
            if _steps(pair, event) and pair.begin is not None:
                made = pair.copy()
                if made is None:
                    continue
                writes = write_count(parameters_of(made))
                if writes > pair.begin:
                    pair.in_step += 1
                    pair.per_step = max(pair.per_step, writes - pair.begin)
                pair.last_end, pair.begin = (event.step, writes), None

    def _begin(self, pair: Pair, step: int) -> None:
        made, source = pair.copy(), pair.original()
        if made is None or source is None:
            pair.rejected = True
            return
        copy_params = parameters_of(made)
        writes = write_count(copy_params)
        if pair.last_end is not None:
            last_step, last_writes = pair.last_end
            if writes - last_writes - (step - last_step - 1) * pair.per_step > 0:
                pair.between += 1
        elif not pair.known:
            self._identify(pair, copy_params, parameters_of(source))
        pair.begin = writes

    def _identify(self, pair: Pair, copy_params: list[Any], source_params: list[Any]) -> None:
        """Whether a look-alike is a copy: its bits equal the original's now."""
        torch = _torch()
        bits, _ = fingerprint(copy_params)
        source_bits, _ = fingerprint(source_params)
        with torch.no_grad():
            equal = (bits == source_bits).all() if bits.shape == source_bits.shape else None
        if equal is None:
            pair.rejected = True
            return
        self.monitor.defer([equal], lambda values: self._identified(pair, values))

    @staticmethod
    def _identified(pair: Pair, values: list[float]) -> None:
        pair.known = values[0] > 0
        pair.rejected = not pair.known

    def _check(self, pair: Pair, step: int) -> None:
        made, source = pair.copy(), pair.original()
        if made is None or source is None:
            pair.rejected = True
            return
        copy_params, source_params = parameters_of(made), parameters_of(source)
        if len(copy_params) != len(source_params):
            pair.rejected = True
            return
        check = Check(step, write_count(copy_params))
        bits, values = fingerprint(copy_params)
        source_bits, source_values = fingerprint(source_params)
        torch = _torch()
        with torch.no_grad():
            if pair.base is None:
                pair.base = (bits, source_values)
                pair.checks.append(check)
                if not pair.known:
                    equal = (bits == source_bits).all()
                    self.monitor.defer([equal], lambda v: self._identified(pair, v))
                return
            base_bits, base_values = pair.base
            vector = torch.stack(
                [
                    (bits != base_bits).any().float(),
                    (values - source_values).norm(),
                    source_values.norm(),
                    (source_values - base_values).norm() / base_values.norm().clamp_min(1e-12),
                ]
            )
        self.monitor.defer(vector, lambda v: self._read(pair, check, v))

    @staticmethod
    def _read(pair: Pair, check: Check, values: list[float]) -> None:
        check.changed, check.distance, check.norm, check.moved = (
            values[0] > 0,
            values[1],
            values[2],
            values[3],
        )
        pair.checks.append(check)

    # -- verdicts ----------------------------------------------------------------------------

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        restore_parametrized_copies()
        if self._error is not None:
            raise self._error  # a failure of ours in the deepcopy hook: one TD001
        for pair in self._pairs.values():
            if not pair.known or pair.rejected:
                continue
            names = names_of(pair, self._module_name)
            if pair.optimizer is not None:
                found = trained(pair, names)
            else:
                found = never_changed(pair, names) or drifting(pair, names)
            if found is not None:
                self.emit(found)

    def _module_name(self, module: Any) -> str:
        if module is None:
            return "?"
        return self.monitor.module_path(module) or type(module).__name__


def _steps(pair: Pair, event: StepEvent) -> bool:
    """Whether the optimizer stepping now is the one holding the pair."""
    return pair.optimizer is not None and pair.optimizer.optimizer is event.optimizer.optimizer


def _torch() -> Any:
    import torch

    return torch
