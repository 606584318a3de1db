"""The bodies of the monitor's hooks: turn PyTorch callbacks into detector events.

Every handler returns at once when the monitor is disabled (after a failure, or inside a
forked DataLoader worker), and wraps its work so that an error of ours reaches
``Monitor.fail`` instead of the user's program. Outside sampled steps a handler does a few
attribute reads and list appends; losses are kept on the device and read back in batches.
"""

from __future__ import annotations

import functools
import sys
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor.runtime.detectors.base import (
    BackwardEvent,
    BatchEvent,
    CallSite,
    ForwardEvent,
    LoaderInfo,
    ModelInfo,
    StepEvent,
    WarningRecord,
)
from torchdoctor.runtime.detectors.records import maker
from torchdoctor.runtime.detectors.scopes import local_items
from torchdoctor.runtime.facts import record_facts
from torchdoctor.runtime.losses import LossStream
from torchdoctor.runtime.sampler_reach import dropped_examples, sampler_reach
from torchdoctor.runtime.sampling import OptimizerState
from torchdoctor.runtime.stats import ProbeSet, StepStats

if TYPE_CHECKING:
    from torchdoctor.runtime.hooks import HookSet
    from torchdoctor.runtime.services import RunServices

__all__ = ["EventHandlers"]

_UNKNOWN_SITE = CallSite("<unknown>", 0, "?", False)
_clock = time.perf_counter
# The events of every step, built without the frozen dataclasses' __init__ (see maker).
_backward_event = maker(BackwardEvent)
_step_event = maker(StepEvent)
_forward_event = maker(ForwardEvent)
_LOSS_BATCH = 8
_DISCOVERY_CALL_LIMIT = 50_000  # module calls without a step: the script is not training


class EventHandlers:
    """State of the event stream of one monitor, and the hook bodies."""

    def __init__(self, monitor: RunServices) -> None:
        self.m = monitor
        self.global_step = 0
        self.backward_count = 0
        self.batches = 0
        self.batch_wait_s = 0.0
        self.busy_s = 0.0  # time spent in our hooks: the monitor's own cost
        self.losses = LossStream(monitor)
        self._states: dict[int, OptimizerState] = {}
        self._only: set[int] | None = None
        self._discovery_calls = 0
        self._discovery_handle: Any = None
        self._discovering = False  # models are found by discovery (none were given)
        self._discovery_until = 0
        self._roots: dict[int, ModelInfo] = {}
        self._forward_always = False
        self._sites: dict[tuple[str, int], CallSite] = {}
        self._loaders: dict[int, LoaderInfo] = {}
        self._hooks: HookSet | None = None
        self.manual = ManualUpdates(monitor)
        self._manual_at = 1  # the next backward pass where parameters are read
        # Read at every step: looked up once.
        self._call = monitor.dispatch.call
        self._tensor = monitor.torch.Tensor

    # -- installation --------------------------------------------------------------------

    def install(self, hooks: HookSet, models: list[Any], optimizers: list[Any]) -> None:
        """Install every hook the run needs."""
        self._hooks = hooks
        if models:
            self._add_models(models)
        else:
            self._discovery_handle = hooks.module_forward_pre_hook(self._discover)
            self._discovering = True
            self._discovery_until = self.m.options.discovery_steps
        if optimizers:
            self._only = {id(o) for o in optimizers}
            for optimizer in optimizers:
                self._state_for(optimizer)
        hooks.optimizer_hooks(self._step_pre, self._step_post)
        hooks.wrap_backward(self._before_backward)
        hooks.wrap_optimizer_init(self._optimizer_built)
        hooks.wrap_loader_next(self._batch)
        self.m.dispatch.on_change = self._subscriptions_changed
        if self.m.dispatch.wants("on_warning"):
            hooks.wrap_showwarning(self._warning)
        if hooks.missing:
            self.m.set_fact("unavailable_hooks", list(hooks.missing))

    def _add_models(self, modules: Any) -> None:
        wanted = self.m.dispatch.wants_forward()
        self._forward_always = wanted == "always"
        for info in self.m.registry.add_candidates(modules):
            self.m.dispatch.call("on_model", info)
            trainable = next(iter(info.inner.parameters()), None) is not None
            if wanted and trainable and self._hooks is not None:
                # One global pre-hook filtered by identity, never a hook on the model: a
                # model must stay picklable, deep-copyable and scriptable while watched.
                if not self._roots:
                    self._hooks.module_forward_pre_hook(self._root_forward)
                self._roots[id(info.module)] = info

    def _subscriptions_changed(self) -> None:
        # A detector unsubscribed from on_forward (or came back): deliver what is wanted.
        self._forward_always = self.m.dispatch.wants_forward() == "always"

    def _optimizer_built(self, optimizer: Any) -> None:
        if self.m.enabled:
            self._guard(self._remember_site, "the optimizer construction hook", optimizer)
            self._guard(self._rediscover, "model discovery")

    def _rediscover(self) -> None:
        """An optimizer built after discovery ended trains a model built late (a second
        fine-tuning run, a new phase): look for models again for a few steps."""
        if (
            self._discovering
            and self._discovery_handle is None
            and self._hooks is not None
            and self._discovery_calls <= _DISCOVERY_CALL_LIMIT
        ):
            self._discovery_handle = self._hooks.module_forward_pre_hook(self._discover)
            self._discovery_until = self.global_step + self.m.options.discovery_steps

    def _remember_site(self, optimizer: Any) -> None:
        """Remember the user's line that built ``optimizer``: the innermost user frame
        that is not the ``__init__`` of the optimizer itself (a user-defined optimizer)."""
        site = self.m.user.site(
            sys._getframe(1),
            skip=lambda frame: (
                frame.f_code.co_name == "__init__" and _initialises(frame, optimizer)
            ),
        )
        if site is not None:
            self.m.optimizer_sites[optimizer] = site

    def _end_discovery(self) -> None:
        if self._discovery_handle is not None:
            self._discovery_handle.remove()
            self._discovery_handle = None

    # -- hooks ---------------------------------------------------------------------------

    def _discover(self, module: Any, args: Any) -> None:
        # Pre-hooks run outermost first, so a module that no known model contains is a
        # root: registering it now lets detectors hook it before its forward runs.
        if not self.m.enabled:
            return
        self._discovery_calls += 1
        if not self.m.registry.knows(module):
            self._guard(self._add_models, "model discovery", [module])
        if self._discovery_calls > _DISCOVERY_CALL_LIMIT:
            self._guard(self._end_discovery, "model discovery")

    def _root_forward(self, module: Any, args: Any) -> None:
        # Called for every module: one dict lookup for the ones that are not roots. Most
        # calls train with gradients on; detectors that only want evaluation-style calls
        # ("no_grad") cost one flag read for them.
        if (
            id(module) in self._roots
            and self.m.enabled
            and (
                self._forward_always
                or not self.m.torch.is_grad_enabled()
                or self.m.torch.is_inference_mode_enabled()
            )
        ):
            self._guard(self._forward, "the model forward hook", module)

    def _forward(self, module: Any) -> None:
        torch = self.m.torch
        info = self._roots.get(id(module))
        if info is not None:
            self.m.dispatch.call(
                "on_forward",
                _forward_event(
                    info,
                    torch.is_grad_enabled(),
                    torch.is_inference_mode_enabled(),
                    self.global_step,
                ),
            )

    def _before_backward(self, tensors: Any, retain_graph: Any) -> None:
        if self.m.enabled:
            self._guard(self._backward, "the backward hook", tensors, retain_graph)

    def _backward(self, tensors: Any, retain_graph: Any) -> None:
        index = self.backward_count
        self.backward_count += 1
        loss = tensors
        if isinstance(tensors, (tuple, list)):
            loss = tensors[0] if len(tensors) == 1 else None
        if not isinstance(loss, self._tensor):
            return
        site = self._caller()
        if loss.numel() == 1 and loss.is_floating_point():
            self.losses.add(loss, site, index, self.global_step)
        self._call(
            "on_backward",
            _backward_event(
                loss,
                site,
                index,
                self.global_step,
                None if retain_graph is None else bool(retain_graph),
            ),
        )
        if index >= self._manual_at and ManualUpdates.due(index):
            self._manual_at = ManualUpdates.next_due(index)
            states = self._states.values()
            self.manual.backward(
                index,
                sum(state.steps for state in states),
                any("event" in state.extra for state in states),
            )

    def _caller(self) -> CallSite:
        """Where backward() was called from; one CallSite object per file and line.

        Frames: 0 here, 1 _backward, 2 _guard, 3 _before_backward, 4 our wrapper of
        torch.autograd.backward, 5 its caller (Tensor.backward, or the user's own call).
        Only the first frame outside torch is read on every call; the user's frame
        behind it is looked up once per file and line.
        """
        frame = self.m.user.first_outside_torch(sys._getframe(5))
        if frame is None:
            return _UNKNOWN_SITE
        key = (frame.f_code.co_filename, frame.f_lineno)
        site = self._sites.get(key)
        if site is None:
            site = self._sites[key] = self.m.user.caller_outside_torch(frame) or _UNKNOWN_SITE
        return site

    def _step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.m.enabled and (self._only is None or id(optimizer) in self._only):
            closure = (len(args) > 1 and args[1] is not None) or kwargs.get("closure") is not None
            self._guard(self._begin_step, "the optimizer step pre-hook", optimizer, closure)

    def _begin_step(self, optimizer: Any, closure: bool) -> None:
        state = self._states.get(id(optimizer))
        if (
            state is None
            or state.info.optimizer is not optimizer
            or len(optimizer.param_groups) != state.groups
        ):
            state = self._state_for(optimizer)
        state.steps += 1
        sampled = self.m.sampler.should_sample(state)
        event = _step_event(
            state.info, state.steps, max(self.global_step, state.steps), sampled, closure
        )
        state.extra["event"] = event
        if sampled:
            start = time.perf_counter()
            params = state.info.params
            if state.probes is None or state.probes.stale(params):
                state.probes = ProbeSet(self.m.torch, params)
            state.current = StepStats(
                self.m.torch, state.info, state.probes, state.steps, event.global_step
            )
            state.current.before()
            state.extra["cost"] = time.perf_counter() - start
        self._call("on_step_begin", event)
        if sampled:
            self._call("on_step_begin:sampled", event)

    def _step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.m.enabled or id(optimizer) not in self._states:
            return
        self._guard(self._end_step, "the optimizer step post-hook", optimizer)
        limit = self.m.options.max_steps
        if limit is not None and self.global_step >= limit and self.m.enabled:
            from torchdoctor.runtime.stop import StopTraining

            self.m.facts["stopped_at_max_steps"] = self.global_step
            raise StopTraining(f"torchdoctor: stopped after --max-steps {limit} steps")

    def steps_taken(self) -> int:
        """Optimizer steps of every optimizer, added up."""
        return sum(state.steps for state in self._states.values())

    def _end_step(self, optimizer: Any) -> None:
        state = self._states[id(optimizer)]
        event = state.extra.pop("event", None)
        if event is None:  # the pre-hook was skipped (the monitor attached mid-step)
            return
        self.global_step = max(self.global_step, state.steps)
        if state.current is not None:
            start = time.perf_counter()
            stats, state.current = state.current, None
            stats.after()
            self.losses.flush(self.global_step)
            self.m.readback.submit(stats.vector(), functools.partial(self._deliver, stats))
            state.last_sampled = state.steps
            self.m.sampler.sample_cost(state.extra.pop("cost", 0.0) + time.perf_counter() - start)
        elif self.losses.pending >= _LOSS_BATCH:
            self.losses.flush(self.global_step)
        self.m.readback.poll()
        self._call("on_step_end", event)
        if event.sampled:
            self._call("on_step_end:sampled", event)
            self.m.progress()
        if self._discovery_handle is not None and (self.global_step >= self._discovery_until):
            self._end_discovery()
        now = time.perf_counter()
        self.m.sampler.step_finished(now)
        status = self.m.status
        if status.enabled:  # off unless stderr is a terminal: skip gathering its numbers
            status.update(now, self.global_step, self.losses.last, len(self.m.dispatch.findings))

    def _batch(self, iterator: Any, wait: float, first: bool) -> None:
        if self.m.enabled:
            self._guard(self._on_batch, "the DataLoader hook", iterator, wait, first)

    def _on_batch(self, iterator: Any, wait: float, first: bool) -> None:
        self.batches += 1
        self.batch_wait_s += wait
        if not self.m.dispatch.wants("on_batch"):
            return
        sampler = getattr(iterator, "_index_sampler", iterator)
        info = self._loaders.get(id(sampler))
        if info is None:
            info = self._loaders[id(sampler)] = _loader_info(iterator)
        self.m.dispatch.call(
            "on_batch",
            BatchEvent(info, id(sampler), wait, first, self.global_step, time.perf_counter()),
        )

    def _warning(self, message: Any, category: Any, filename: str, lineno: int) -> None:
        if self.m.enabled:
            self._guard(self._on_warning, "the warnings hook", message, category, filename, lineno)

    def _on_warning(self, message: Any, category: Any, filename: str, lineno: int) -> None:
        site = self.m.user.site(sys._getframe(3))
        self.m.dispatch.call(
            "on_warning",
            WarningRecord(str(message), category, filename, lineno, site, self.global_step),
        )

    # -- optimizers, losses, samples -----------------------------------------------------

    def _state_for(self, optimizer: Any) -> OptimizerState:
        state = self._states.get(id(optimizer))
        if (
            state is not None
            and state.info.optimizer is optimizer
            and len(optimizer.param_groups) == state.groups
        ):
            return state
        info = self.m.registry.add_optimizer(optimizer)
        if state is None:
            state = self._states[id(optimizer)] = OptimizerState(info)
        else:
            state.info, state.probes = info, None
        state.groups = len(optimizer.param_groups)
        self.m.dispatch.call("on_optimizer", info)
        return state

    def _deliver(self, stats: StepStats, values: list[float]) -> None:
        self.m.dispatch.call("on_sample", stats.decode(values))

    def flush(self) -> None:
        """End of the run: stop discovery and read back what is still on the device."""
        self._end_discovery()
        for state in self._states.values():
            state.current = None  # a step that raised never reached its post-hook
        self.losses.flush(self.global_step)

    def record_facts(self) -> None:
        """Put the run's counts, timings and loss curves into the monitor's facts."""
        record_facts(self.m, self, list(self._states.values()))

    def _guard(self, function: Any, where: str, *args: Any) -> None:
        start = _clock()
        try:
            function(*args)
        except Exception as error:  # noqa: BLE001 - never break the user's program
            if raised_by_signal_handler(error):
                raise  # the user's own signal handler spoke: their exception, not ours
            self.m.fail(error, where)
        finally:
            self.busy_s += _clock() - start


class ManualUpdates:
    """Parameters changed by hand between backward passes, with no optimizer step between
    them (``p.data -= lr * p.grad``, ``with torch.no_grad(): p -= ...``, ``p.add_(...)``).

    Read at a few backward passes (1, 2, 4, ..., 64, then every 64th): a fingerprint of the
    first values of the known models' first trainable parameters, read back without a
    synchronisation. ``p.data`` has a version counter of its own, so values are compared,
    not versions. ``intervals`` counts the checks that saw parameters move without a step.
    """

    def __init__(self, monitor: RunServices) -> None:
        self.m = monitor
        self.intervals = 0
        self.checks = 0
        self._previous: tuple[int, tuple[int, ...], list[float]] | None = None

    @staticmethod
    def due(index: int) -> bool:
        """Whether backward pass ``index`` is one where parameters are read."""
        return index > 0 and (
            index & (index - 1) == 0 and index <= _MANUAL_DENSE or index % _MANUAL_DENSE == 0
        )

    @staticmethod
    def next_due(index: int) -> int:
        """The first backward pass after ``index`` where parameters are read."""
        if index < _MANUAL_DENSE:  # the next power of two
            return 1 << index.bit_length() if index > 0 else 1
        return (index // _MANUAL_DENSE + 1) * _MANUAL_DENSE

    def backward(self, index: int, steps: int, in_step: bool = False) -> None:
        """Before backward pass ``index``, with ``steps`` optimizer steps so far.

        Inside ``step(closure)`` (L-BFGS, line searches) the optimizer itself moves the
        parameters between backward passes: the comparison starts again after it.
        """
        if in_step:
            self._previous = None
            return
        if not self.due(index):
            return
        params = [
            p
            for model in self.m.registry.models
            for p in model.inner.parameters()
            if p.requires_grad and p.numel() and p.is_floating_point() and p.device.type != "meta"
        ][:_MANUAL_PARAMS]
        if not params:
            return
        torch = self.m.torch
        with torch.no_grad():
            device = params[0].device
            vector = torch.stack(
                [p.detach().reshape(-1)[:_MANUAL_VALUES].float().sum().to(device) for p in params]
            )
        ids = tuple(id(p) for p in params)
        self.m.defer(vector, functools.partial(self._compare, steps, ids))

    def _compare(self, steps: int, ids: tuple[int, ...], values: list[float]) -> None:
        previous, self._previous = self._previous, (steps, ids, values)
        if previous is None or previous[1] != ids:
            return
        self.checks += 1
        if previous[0] == steps and previous[2] != values:
            self.intervals += 1


_MANUAL_DENSE = 64  # backward passes: checked at powers of two up to here, then every 64th
_MANUAL_PARAMS = 8
_MANUAL_VALUES = 16


def _loader_info(iterator: Any) -> LoaderInfo:
    sampler = getattr(iterator, "_index_sampler", None)
    return LoaderInfo(
        num_workers=int(getattr(iterator, "_num_workers", 0) or 0),
        pin_memory=bool(getattr(iterator, "_pin_memory", False)),
        persistent_workers=bool(getattr(iterator, "_persistent_workers", False)),
        batch_size=getattr(sampler, "batch_size", None),
        prefetch_factor=getattr(iterator, "_prefetch_factor", None),
        reach=sampler_reach(getattr(iterator, "_dataset", None), sampler),
        drops=dropped_examples(sampler),
    )


def _initialises(frame: FrameType, obj: Any) -> bool:
    """Whether ``frame`` runs ``obj.__init__`` (its first argument is ``obj``)."""
    code = frame.f_code
    if not code.co_argcount:
        return False
    first = code.co_varnames[0]
    return any(value is obj for name, value in local_items(frame) if name == first)
