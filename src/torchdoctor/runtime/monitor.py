"""The monitor: PyTorch's global hooks in, detector events out, one report at the end.

One :class:`Monitor` watches one run. :meth:`Monitor.attach` installs the hooks (see
:mod:`torchdoctor.runtime.hooks`); every hook body is guarded so that torchdoctor can never
break the user's program: a detector's failure switches that detector off (``TD001``), a
failure of the monitor itself switches the whole monitor off (``TD001``). Only
:class:`StopTraining` (``max_steps`` reached) is raised into the user's code, on purpose.
:meth:`Monitor.finish` removes every hook and returns the :class:`~torchdoctor.findings.Report`.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from torchdoctor.__about__ import __version__
from torchdoctor._torch import require_torch
from torchdoctor.facts import Facts
from torchdoctor.findings import Depth, Finding, Location, Report
from torchdoctor.rules.detectors import load_detector_modules, registered_detectors
from torchdoctor.rules.selection import Selection
from torchdoctor.runtime.detectors.base import CallSite, ModelInfo, OptimizerInfo
from torchdoctor.runtime.detectors.tree import forget as forget_walks
from torchdoctor.runtime.discovery import ModelRegistry
from torchdoctor.runtime.dispatch import Dispatcher
from torchdoctor.runtime.events import EventHandlers
from torchdoctor.runtime.exceptions.frames import add_run_script, remove_run_script
from torchdoctor.runtime.frames import UserCode
from torchdoctor.runtime.hooks import HookSet
from torchdoctor.runtime.patches import remove_dead
from torchdoctor.runtime.readback import Readback
from torchdoctor.runtime.sampling import Sampler
from torchdoctor.runtime.status import StatusLine
from torchdoctor.runtime.stop import StopTraining

__all__ = ["Monitor", "MonitorOptions", "StopTraining", "active_monitor"]


# How long the GIL is let go before a run's DDP models are released (see Monitor._release).
_SETTLE_S = 0.05


def _is_ddp(module: Any) -> bool:
    return type(module).__name__ == "DistributedDataParallel"


@dataclass(frozen=True, slots=True)
class MonitorOptions:
    """How to watch a run.

    Attributes:
        command: ``"run"`` or ``"watch"``, recorded in the report.
        max_steps: stop after this many optimizer steps (raises :class:`StopTraining`).
        sample_every: full statistics every N steps; ``None`` picks a cost-bounded schedule.
        selection: which rules to report.
        status: show the live status line (``None``: only when stderr is a terminal).
        discovery_steps: how many optimizer steps the global module hook looks for models.
        localise_non_finite: check every module's output for NaN/Inf from the first step
            (the default waits for a first symptom, which is cheap but may come too late).
        script: the script run by ``torchdoctor run``; its frames are always user code,
            even inside an installed package or torchdoctor itself (the demo).
        roots: directories of the user's code.
        detectors: the user's own detector instances (``watch(detectors=[...])``, see
            :mod:`torchdoctor.custom`), run after the built-in ones.
        progress: called with the report so far at sampled steps when findings changed
            (``torchdoctor run --report`` keeps its file current, so that a run that ends
            by ``os._exit`` or a kill still leaves its findings); its failures are ignored.
    """

    command: str = "watch"
    max_steps: int | None = None
    sample_every: int | None = None
    selection: Selection = field(default_factory=Selection)
    status: bool | None = False
    discovery_steps: int = 2
    localise_non_finite: bool = False
    script: Path | None = None
    roots: tuple[Path, ...] = ()
    detectors: tuple[Any, ...] = ()
    progress: Callable[[Report], None] | None = None


_ACTIVE: list[Monitor] = []


def active_monitor() -> Monitor | None:
    """The monitor currently attached in this process, if any."""
    return _ACTIVE[0] if _ACTIVE else None


def _disable_in_forked_child() -> None:
    # DataLoader workers started with fork inherit the hooks; they must stay inert there.
    for monitor in _ACTIVE:
        monitor.enabled = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disable_in_forked_child)


class Monitor:
    """Watches one training run; implements the detectors' ``MonitorView``."""

    def __init__(
        self,
        options: MonitorOptions | None = None,
        models: Sequence[Any] = (),
        optimizers: Sequence[Any] = (),
    ) -> None:
        self.options = options or MonitorOptions()
        self.torch = require_torch(f"torchdoctor {self.options.command}")
        self.enabled = False
        self.registry = ModelRegistry()
        script = self.options.script
        self.user = UserCode(self.options.roots, scripts=(script,) if script else ())
        self.sampler = Sampler(self.options.sample_every)
        self.facts = Facts()
        self.series: dict[str, list[float]] = {}
        # Where each optimizer built during the run was built (weak: never keeps one alive).
        self.optimizer_sites: weakref.WeakKeyDictionary[Any, CallSite] = weakref.WeakKeyDictionary()
        self.status = StatusLine(enabled=self.options.status)
        self._given_models = list(models)
        self._given_optimizers = list(optimizers)
        self._hooks = HookSet(self.torch)
        self._started = 0.0
        self._ended: float | None = None  # set once, when the run ends: facts are final
        self._started_clock = ""
        self._pid = os.getpid()
        self.final_report: Report | None = None
        self.detachable = False  # started by watch().start(): a later watch may end it
        self._progress_count = -1
        self._progress_off = False
        load_detector_modules((Depth.RUN,))
        self.dispatch = Dispatcher(
            registered_detectors(Depth.RUN), self.options.selection, self.options.detectors
        )
        self.readback = Readback(self.torch, self._readback_failed)
        self.events = EventHandlers(self)

    # -- MonitorView ---------------------------------------------------------------------

    @property
    def global_step(self) -> int:
        return self.events.global_step

    @property
    def steps_taken(self) -> int:
        return self.events.steps_taken()

    def is_active(self) -> bool:
        return active_monitor() is self

    @property
    def models(self) -> Sequence[ModelInfo]:
        return tuple(self.registry.models)

    @property
    def optimizers(self) -> Sequence[OptimizerInfo]:
        return tuple(self.registry.optimizers)

    @property
    def user_roots(self) -> Sequence[Path]:
        return self.user.roots

    @property
    def script(self) -> Path | None:
        return self.options.script

    def module_path(self, module: Any) -> str | None:
        return self.registry.module_path(module)

    def param_name(self, param: Any) -> str | None:
        return self.registry.param_name(param)

    def model_of(self, param: Any) -> ModelInfo | None:
        return self.registry.model_of_param(param)

    def models_of(self, optimizer: OptimizerInfo) -> Sequence[ModelInfo]:
        return self.registry.models_of(optimizer)

    def user_site(self, frame: FrameType | None = None) -> CallSite | None:
        return self.user.site(frame if frame is not None else sys._getframe(1))

    def user_location(self, frame: FrameType | None = None, **extra: Any) -> Location:
        site = self.user.site(frame if frame is not None else sys._getframe(1))
        return site.location(**extra) if site is not None else Location(**extra)

    def user_site_from_traceback(self, tb: TracebackType | None) -> CallSite | None:
        return self.user.site_from_traceback(tb)

    def optimizer_site(self, optimizer: Any) -> CallSite | None:
        try:
            return self.optimizer_sites.get(optimizer)
        except TypeError:  # an optimizer that cannot be weakly referenced
            return None

    def is_user_file(self, path: str) -> bool:
        return self.user.is_user_file(path)

    def defer(self, tensors: Any, callback: Callable[[list[float]], None]) -> None:
        torch = self.torch
        if isinstance(tensors, torch.Tensor):
            vector = tensors.detach().reshape(-1)
            if vector.dtype != torch.float64:  # float64 stays: exact comparisons need it
                vector = vector.float()
            self.readback.submit(vector, callback)
            return
        if not tensors:
            callback([])
            return
        device = tensors[0].device
        with torch.no_grad():
            vector = torch.stack(
                [t.detach().reshape(()).to(device, torch.float32) for t in tensors]
            )
        self.readback.submit(vector, callback)

    def emit(self, finding: Finding) -> None:
        self.dispatch.emit(finding)

    def set_fact(self, key: str, value: Any) -> None:
        self.facts[key] = value

    def add_series(self, name: str, values: Sequence[float]) -> None:
        self.series[name] = list(values)

    def progress(self) -> None:
        """Hand the report so far to ``options.progress`` if findings changed since the
        last time (called at sampled steps; never raises, a failing callback is dropped)."""
        callback = self.options.progress
        count = len(self.dispatch.findings)
        if callback is None or self._progress_off or count == self._progress_count:
            return
        if self._pid != os.getpid():  # a forked child: the file is the parent's
            return
        self._progress_count = count
        try:
            callback(self._report())
        except Exception:  # noqa: BLE001 - the report file is a convenience, the run is not
            self._progress_off = True

    # -- lifecycle -----------------------------------------------------------------------

    def attach(self) -> None:
        """Install the hooks. Only one monitor may be attached per process at a time."""
        if _ACTIVE:
            from torchdoctor.errors import UsageError

            raise UsageError(
                "torchdoctor is already watching this process; nested "
                "watch() blocks are not supported"
            )
        remove_dead()  # patches an earlier run left (it failed before its detectors ended)
        _ACTIVE.append(self)
        if self.options.script is not None:  # errors and warnings it raises are the user's
            add_run_script(str(self.options.script))
        self._started = time.perf_counter()
        self._started_clock = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        )
        self.enabled = True
        for detector in list(self.dispatch.detectors):
            self.dispatch.guarded(detector, detector.on_attach, self)
        try:
            self.events.install(self._hooks, self._given_models, self._given_optimizers)
        except Exception as error:  # noqa: BLE001 - run unwatched rather than not at all
            self._hooks.remove()
            self.fail(error, "attach")

    def finish(self, exc: BaseException | None = None) -> Report:
        """Remove the hooks, let detectors conclude, and build the report.

        Idempotent (a second call returns the same report), and it never raises: whatever
        fails in here becomes a ``TD001`` finding, and the process is left unwatched
        (hooks removed, the run script unregistered) in every case.
        """
        if self.final_report is not None:
            return self.final_report
        try:
            report = self._finish(exc)
        except Exception as error:  # noqa: BLE001 - never into the user's code
            self.fail(error, "finish")
            report = self._report()
        finally:
            self.enabled = False
            with contextlib.suppress(Exception):
                self._hooks.remove()  # a no-op when _finish got that far
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            # Every detector's patches go with the run, also those of a detector switched
            # off after a failure, or of a finish that failed before on_finish.
            with contextlib.suppress(Exception):
                remove_dead()
            if self.options.script is not None:
                remove_run_script(str(self.options.script))
        self.final_report = report
        return report

    def _finish(self, exc: BaseException | None) -> Report:
        self._ended = time.perf_counter()
        self.enabled = False
        self._hooks.remove()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        self.status.clear()
        try:
            self.events.flush()
            self.readback.flush()
        except Exception as error:  # noqa: BLE001
            self.dispatch.internal_error(
                f"the monitor failed while finishing: {error}", "monitor", error
            )
        if exc is not None and not isinstance(exc, (StopTraining, SystemExit, KeyboardInterrupt)):
            self.dispatch.call("on_exception", exc)
        self.events.record_facts()
        # In registration order, each with the findings so far: a detector may build on
        # the conclusions of the modules imported before it (see detectors/__init__).
        for detector, method in tuple(self.dispatch.hooks.get("on_finish", ())):
            self.dispatch.guarded(detector, method, self._report())
        report = self._report()
        self._release()
        return report

    def _release(self) -> None:
        """Drop every reference to the user's objects now that the report is built.

        The monitor, its event handlers and its detectors refer to each other, so what
        they hold (models, optimizers, tensors) would otherwise wait for Python's cycle
        collector, which may run at a bad time: in a forked DataLoader worker, where
        destroying a DDP model's process group hangs.

        Where the run built DDP models, the GIL is first let go for a moment: a gloo
        worker thread destroying its last finished work needs the GIL (the work keeps
        Python state of the backward that launched it), while dropping our reference
        may destroy the process group, whose destructor joins that thread holding the
        GIL. On a loaded machine the worker can still be at it when the run ends.
        """
        if any(_is_ddp(model.module) for model in self.registry.models):
            time.sleep(_SETTLE_S)
        self.registry.clear()
        self.optimizer_sites.clear()
        self._given_models.clear()
        self._given_optimizers.clear()
        self.events = EventHandlers(self)
        self.dispatch.clear()
        forget_walks()

    def _report(self) -> Report:
        # The progress report is written while the run goes on: its duration is the
        # time so far, and the final report's is the run's, never the first write's.
        now = self._ended if self._ended is not None else time.perf_counter()
        self.facts["duration_s"] = round(now - self._started, 3) if self._started else 0.0
        report = Report(
            tool_version=__version__,
            command=self.options.command,
            created=self._started_clock,
            facts=self.facts.copy(),
            series=dict(self.series),
        )
        report.extend(self.dispatch.findings.values())
        return report

    def fail(self, error: BaseException, where: str) -> None:
        """The monitor's own code failed: report it and stop watching, never the user's run."""
        self.enabled = False
        self.dispatch.internal_error(
            f"torchdoctor's monitor failed in {where} ({type(error).__name__}: {error}) and "
            "stopped watching; findings cover the run up to that point",
            "monitor",
            error,
        )

    def _readback_failed(self, callback: Callable[..., None], error: BaseException) -> None:
        # Find the detector that deferred the callback: a bound method, or a closure whose
        # qualified name starts with the detector's class name.
        function = getattr(callback, "func", callback)
        owner = getattr(function, "__self__", None)
        owner_class = getattr(function, "__qualname__", "").split(".")[0]
        for detector in self.dispatch.detectors:
            if owner is detector or (owner is None and type(detector).__name__ == owner_class):
                self.dispatch.disable(detector, error, "a deferred read-back")
                return
        self.fail(error, "a read-back")
