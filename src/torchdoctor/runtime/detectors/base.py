"""The runtime detector interface: a base class whose hooks are documented no-ops.

A runtime detector is a class that subclasses :class:`RuntimeDetector`, overrides only the
hooks it needs, and is registered with ``@detector(code, ..., depth=Depth.RUN)``. The
monitor (:mod:`torchdoctor.runtime.monitor`) makes one instance per watched run and calls
its hooks from PyTorch's global hooks. It builds its dispatch lists once, from the hooks a
class overrides, so an unused hook costs nothing (the Lightning ``Callback`` shape)::

    @detector("TD210", depth=Depth.RUN)
    class StepWithoutGradients(RuntimeDetector):
        def on_step_begin(self, event: StepEvent) -> None:
            if event.sampled and ...:
                self.report(self.monitor.user_location(), "...", fix_hint="...")

Hooks, in the order a training iteration fires them:

=====================  =====================================================================
``on_attach``          once, before the user's code runs; ``self.monitor`` is set
``on_model``           a root model was discovered (or given to ``watch(model=...)``)
``on_optimizer``       an optimizer stepped for the first time (or was given)
``on_batch``           a ``DataLoader`` iterator returned a batch; how long it waited
``on_forward``         a root model is called (only for classes with ``wants_forward``)
``on_backward``        ``backward()`` is about to run on a loss (the tensor is lent)
``on_step_begin``      ``optimizer.step()`` starts (gradients are final)
``on_step_end``        ``optimizer.step()`` returned
``on_sample``          host numbers of a sampled step (norms, update sizes), read back late
``on_losses``          loss values read back from the device, in batches, in order
``on_warning``         a Python warning was shown while the run was watched
``on_exception``       the watched code raised (zero cost until then)
``on_finish``          once, at the end, even after an exception or Ctrl-C: emit what's left
=====================  =====================================================================

What detectors may use, through ``self.monitor`` (a :class:`MonitorView`): the current
global step; the known root models and optimizers; :meth:`MonitorView.module_path` (module
-> ``encoder.layers.3.attn``) and :meth:`MonitorView.param_name`; the user's code roots and
:meth:`MonitorView.user_location` (the innermost frame of the user's own code, found from
the stack only when asked); and :meth:`MonitorView.defer` (read device tensors back later,
without a synchronisation now).

Rules for detectors:

* Never change the run: no RNG use, no in-place op on user tensors, no mode, flag or
  ``requires_grad`` change, no ``.grad`` change. Keep no reference to a lent tensor (a loss,
  a batch) past the hook unless ``detach()``-ed; never keep a graph alive.
* Be cheap outside sampled steps (``event.sampled``): a few attribute reads.
* Emit a finding as soon as you are sure; emitting again with the same rule and place
  replaces the earlier one (see :meth:`RuntimeDetector.emit`), so evidence can be refreshed.
* Raising is safe but final: the monitor reports one ``TD001`` naming the detector and
  switches it off for the rest of the run.
* Once a hook can no longer lead to a finding (what it watches for was reported, or it has
  seen enough to know it never will), :meth:`RuntimeDetector.unsubscribe` from it: the
  monitor stops calling it. Only when that is certain: a finding that can still appear
  later (a new call site, a later step) needs the hook. A detector that judges each
  optimizer (or model) anew may :meth:`RuntimeDetector.resubscribe` from ``on_optimizer``
  (``on_model``), which the monitor calls before the newcomer's first step hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Confidence, Finding, Location, Report, Severity
from torchdoctor.runtime.detectors.records import (
    BackwardEvent,
    BatchEvent,
    CallSite,
    ForwardEvent,
    LoaderInfo,
    LossValue,
    ModelInfo,
    OptimizerInfo,
    StepEvent,
    StepSample,
    WarningRecord,
)

if TYPE_CHECKING:  # torch is imported by the monitor when it runs, never here
    import torch

__all__ = [
    "BackwardEvent",
    "BatchEvent",
    "CallSite",
    "ForwardEvent",
    "LoaderInfo",
    "LossValue",
    "ModelInfo",
    "MonitorView",
    "OptimizerInfo",
    "RunOptions",
    "RuntimeDetector",
    "StepEvent",
    "StepSample",
    "WarningRecord",
]


class RunOptions(Protocol):
    """How a run is watched, as detectors may read it (``runtime.monitor.MonitorOptions``
    provides it)."""

    @property
    def command(self) -> str:
        """``"run"`` (``torchdoctor run``) or ``"watch"`` (the Python API)."""

    @property
    def max_steps(self) -> int | None:
        """The run stops after this many optimizer steps (``None``: no limit)."""

    @property
    def localise_non_finite(self) -> bool:
        """Check every module's output for NaN/Inf from the first step."""


class MonitorView(Protocol):
    """What the monitor offers detectors (implemented by ``runtime.monitor.Monitor``)."""

    @property
    def global_step(self) -> int:
        """Optimizer steps completed so far (the largest count of any optimizer)."""

    def is_active(self) -> bool:
        """Whether this monitor is the one attached in this process now."""

    @property
    def steps_taken(self) -> int:
        """Optimizer steps completed so far by every optimizer, added up (computed when
        asked: for a hook that runs now and then, not at every step)."""

    @property
    def models(self) -> Sequence[ModelInfo]:
        """Root models known so far."""

    @property
    def optimizers(self) -> Sequence[OptimizerInfo]:
        """Optimizers seen so far."""

    @property
    def user_roots(self) -> Sequence[Path]:
        """Directories holding the user's code (the script's folder for ``run``)."""

    @property
    def script(self) -> Path | None:
        """The script being run by ``torchdoctor run``, if any."""

    @property
    def options(self) -> RunOptions:
        """How the run is watched (``max_steps``, ``localise_non_finite``, ...)."""

    def module_path(self, module: torch.nn.Module) -> str | None:
        """``encoder.layers.3.attn`` for a module inside a known model, else ``None``."""

    def param_name(self, param: torch.Tensor) -> str | None:
        """``encoder.layers.3.attn.in_proj_weight`` for a known model's parameter."""

    def model_of(self, param: torch.Tensor) -> ModelInfo | None:
        """The known model holding ``param``."""

    def models_of(self, optimizer: OptimizerInfo) -> Sequence[ModelInfo]:
        """The known models holding at least one of the optimizer's parameters."""

    def user_site(self, frame: FrameType | None = None) -> CallSite | None:
        """The innermost frame of the user's code, from ``frame`` (default: the caller)."""

    def user_location(self, frame: FrameType | None = None, **extra: Any) -> Location:
        """:meth:`user_site` as a location; ``Location(**extra)`` when none is found."""

    def user_site_from_traceback(self, tb: TracebackType | None) -> CallSite | None:
        """The deepest frame of the user's code in a traceback."""

    def optimizer_site(self, optimizer: torch.optim.Optimizer) -> CallSite | None:
        """The user's line that built ``optimizer``, when it was built while watched."""

    def is_user_file(self, path: str) -> bool:
        """Whether a file belongs to the user's code (not torch, torchdoctor or stdlib)."""

    def defer(
        self,
        tensors: Sequence[torch.Tensor] | torch.Tensor,
        callback: Callable[[list[float]], None],
    ) -> None:
        """Read 0-d tensors (or one 1-D tensor) back later, without a sync now; call back.

        Values arrive as float32, except a 1-D float64 tensor's, which keep their precision.
        On the CPU the callback runs at once; on CUDA at a later step, or at the end of
        the run. It runs with the same failure isolation as the hooks.
        """

    def emit(self, finding: Finding) -> None:
        """Record a finding (replacing one with the same rule and place)."""

    def set_fact(self, key: str, value: Any) -> None:
        """Record a measured fact of the run, shown in the report; ``key`` and the type of
        ``value`` are declared in :mod:`torchdoctor.facts`."""

    def add_series(self, name: str, values: Sequence[float]) -> None:
        """Record a named sequence for plots."""


class RuntimeDetector:
    """Base class of runtime detectors; every hook is a no-op until overridden.

    Class attributes:
        wants_forward: receive :meth:`on_forward` for calls of root models (costs one
            Python call per model call, so only detectors that need it ask): ``True`` for
            every call, ``"no_grad"`` only for calls made with gradients disabled.
        sampled_hooks: names of step hooks (``"on_step_begin"``, ``"on_step_end"``) to
            call on sampled steps only; the others are called at every step.
    """

    wants_forward: ClassVar[bool | str] = False
    sampled_hooks: ClassVar[frozenset[str]] = frozenset()

    monitor: MonitorView

    # Set by the monitor (its dispatch); a detector never replaces it.
    reporter: Reporter | None = None
    # Set by the monitor's dispatch: ``subscriptions(self, hooks, on)`` puts the detector
    # back on, or takes it off, the lists of ``hooks`` (see unsubscribe()).
    subscriptions: Callable[[RuntimeDetector, frozenset[str], bool], None] | None = None

    @property
    def name(self) -> str:
        """The detector's name in reports (its class name)."""
        return type(self).__name__

    def attached(self) -> bool:
        """Whether this detector's monitor is the one watching now: the ``alive`` test of
        the detector's :class:`~torchdoctor.runtime.patches.Patches`, so that patches of a
        detector switched off after a failure (which never reaches ``on_finish``) go."""
        monitor = getattr(self, "monitor", None)
        return monitor is not None and monitor.is_active()

    def unsubscribe(self, *hooks: str) -> None:
        """Stop receiving ``hooks`` (default: every per-step hook, :data:`STEP_HOOKS`) for
        the rest of the run, or until :meth:`resubscribe`. ``"on_step_end"`` also stops
        its sampled calls. Safe from inside the hook itself."""
        if self.subscriptions is not None:
            self.subscriptions(self, frozenset(hooks or STEP_HOOKS), False)

    def resubscribe(self, *hooks: str) -> None:
        """Receive ``hooks`` (default: :data:`STEP_HOOKS`) again, from the next event on."""
        if self.subscriptions is not None:
            self.subscriptions(self, frozenset(hooks or STEP_HOOKS), True)

    def emit(self, finding: Finding) -> None:
        """Report a finding already built. Emitting again for the same rule and place
        replaces it. (The one interface: :class:`~torchdoctor._kernel.Reporter`.)"""
        if self.reporter is not None:
            self.reporter.emit(finding)

    def report(
        self,
        where: Location,
        message: str,
        *,
        code: str | None = None,
        fix_hint: str = "",
        evidence: Mapping[str, Any] | None = None,
        confidence: Confidence = Confidence.HIGH,
        severity: Severity | None = None,
    ) -> None:
        """Build a finding of ``code`` (default: the first code the detector was registered
        with) at ``where`` and :meth:`emit` it."""
        if self.reporter is not None:
            self.reporter.report(
                where,
                message,
                code=code,
                fix_hint=fix_hint,
                evidence=evidence,
                confidence=confidence,
                severity=severity,
            )

    # -- lifecycle -----------------------------------------------------------------------

    def on_attach(self, monitor: MonitorView) -> None:
        """Called once before the watched code runs. Keeps ``monitor`` by default."""
        self.monitor = monitor

    def on_finish(self, report: Report) -> None:
        """Called once at the end (also after an exception or Ctrl-C); emit pending findings.

        ``report`` holds the run's facts and the findings emitted so far, including those
        of detectors whose ``on_finish`` ran before (module import order).
        """

    # -- discovery -----------------------------------------------------------------------

    def on_model(self, model: ModelInfo) -> None:
        """A root model became known."""

    def on_optimizer(self, optimizer: OptimizerInfo) -> None:
        """An optimizer became known (at its first ``step()``, or given to ``watch``)."""

    # -- the training iteration ----------------------------------------------------------

    def on_batch(self, event: BatchEvent) -> None:
        """A ``DataLoader`` iterator returned a batch."""

    def on_forward(self, event: ForwardEvent) -> None:
        """A root model is about to run its forward (needs ``wants_forward = True``)."""

    def on_backward(self, event: BackwardEvent) -> None:
        """``backward()`` is about to run on ``event.loss``."""

    def on_step_begin(self, event: StepEvent) -> None:
        """``optimizer.step()`` is about to run; gradients are final."""

    def on_step_end(self, event: StepEvent) -> None:
        """``optimizer.step()`` returned."""

    def on_sample(self, sample: StepSample) -> None:
        """Statistics of a sampled step, read back from the device (possibly steps later)."""

    def on_losses(self, losses: Sequence[LossValue]) -> None:
        """Loss values read back from the device, in backward order, a batch at a time.

        Delivered every few steps, at sampled steps and at the end of the run.
        """

    # -- events outside the loop ---------------------------------------------------------

    def on_warning(self, record: WarningRecord) -> None:
        """A Python warning was shown during the run."""

    def on_exception(self, exc: BaseException) -> None:
        """The watched code raised ``exc`` (``exc.__traceback__`` holds the frames).

        Not called for ``KeyboardInterrupt``, ``SystemExit`` or ``StopTraining``.
        """


# Hook names the monitor dispatches; a detector "uses" a hook when it overrides it.
HOOKS: tuple[str, ...] = (
    "on_model",
    "on_optimizer",
    "on_batch",
    "on_forward",
    "on_backward",
    "on_step_begin",
    "on_step_end",
    "on_sample",
    "on_losses",
    "on_warning",
    "on_exception",
    "on_finish",
)


# The hooks of the training iteration: what unsubscribe() stops by default.
STEP_HOOKS: tuple[str, ...] = (
    "on_batch",
    "on_forward",
    "on_backward",
    "on_step_begin",
    "on_step_end",
)


def overridden_hooks(cls: type[RuntimeDetector]) -> frozenset[str]:
    """The hooks a detector class overrides: its dispatch entries.

    A step hook listed in ``cls.sampled_hooks`` gets the entry ``"<hook>:sampled"``.
    """
    return frozenset(
        f"{name}:sampled" if name in cls.sampled_hooks else name
        for name in HOOKS
        if getattr(cls, name) is not getattr(RuntimeDetector, name)
    )
