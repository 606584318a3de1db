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
                self.emit(finding("TD210", ..., self.monitor.user_location(), Depth.RUN))

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
``on_loss``            loss values read back from the device, in backward order
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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from torchdoctor.findings import Finding, Location, Report

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
    "RuntimeDetector",
    "StepEvent",
    "StepSample",
    "WarningRecord",
]


@dataclass(frozen=True, slots=True)
class CallSite:
    """A place in the code, kept as a cheap key and resolved to a location on demand.

    Attributes:
        path: absolute file name of the frame.
        line: line number in it.
        function: the function's name.
        user: whether the file belongs to the user's code (see ``MonitorView.user_roots``).
    """

    path: str
    line: int
    function: str
    user: bool

    def location(self, **extra: Any) -> Location:
        """This site as a :class:`Location`, with the source line as snippet when readable."""
        import linecache

        snippet = linecache.getline(self.path, self.line).rstrip("\n") or None
        return Location(path=self.path, line=self.line, snippet=snippet, **extra)

    def __str__(self) -> str:
        return f"{Path(self.path).name}:{self.line}"


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A root model: a module that is not inside another watched module.

    Attributes:
        module: the module object as the user calls it (a DDP or compiled wrapper included).
        inner: the module whose names are shown (wrappers such as DDP's ``module`` or
            ``torch.compile``'s ``_orig_mod`` are looked through).
        label: the prefix shown before paths when several models are watched
            (``"Generator"``), or ``""`` when there is one.
        index: order of discovery, from 0.
    """

    module: torch.nn.Module
    inner: torch.nn.Module
    label: str
    index: int

    @property
    def class_name(self) -> str:
        """The inner module's class name."""
        return type(self.inner).__name__


@dataclass(frozen=True, slots=True)
class OptimizerInfo:
    """An optimizer seen by the monitor, with its parameters flattened across groups.

    Attributes:
        optimizer: the optimizer.
        index: order of discovery, from 0.
        params: every parameter of every group, in group order.
        names: a display name per parameter (``encoder.0.weight``; ``param[7]`` when the
            parameter belongs to no known model).
        label: ``"Adam"``, or ``"Adam #2"`` when several optimizers share a class.
    """

    optimizer: torch.optim.Optimizer
    index: int
    params: tuple[torch.Tensor, ...]
    names: tuple[str, ...]
    label: str


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One call of ``optimizer.step()``.

    Attributes:
        optimizer: which optimizer.
        step: that optimizer's own step count, this step included (1-based).
        global_step: the run's step: the largest step count of any optimizer.
        sampled: whether full statistics are computed for this step (see ``on_sample``).
        closure: ``step()`` got a closure (LBFGS style): gradients are computed inside it.
    """

    optimizer: OptimizerInfo
    step: int
    global_step: int
    sampled: bool
    closure: bool = False


@dataclass(frozen=True, slots=True)
class BackwardEvent:
    """``backward()`` is about to run.

    Attributes:
        loss: the tensor ``backward()`` was called on. Lent for the duration of the hook.
        site: where ``backward()`` was called from (the first frame outside torch).
        index: how many backward calls came before this one.
        global_step: optimizer steps completed so far.
        retain_graph: the ``retain_graph`` argument as given.
    """

    loss: torch.Tensor
    site: CallSite
    index: int
    global_step: int
    retain_graph: bool | None


@dataclass(frozen=True, slots=True)
class ForwardEvent:
    """A root model is called (only delivered to detectors with ``wants_forward``).

    Attributes:
        model: the model being called.
        grad_enabled: ``torch.is_grad_enabled()`` at the call.
        inference_mode: ``torch.is_inference_mode_enabled()`` at the call.
        global_step: optimizer steps completed so far.
    """

    model: ModelInfo
    grad_enabled: bool
    inference_mode: bool
    global_step: int


@dataclass(frozen=True, slots=True)
class LoaderInfo:
    """Facts about the ``DataLoader`` behind an iterator."""

    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    batch_size: int | None
    prefetch_factor: int | None


@dataclass(frozen=True, slots=True)
class BatchEvent:
    """A ``DataLoader`` iterator handed out a batch.

    Attributes:
        loader: facts about its loader.
        loader_id: ``id()`` of the iterator's loader, to tell loaders apart.
        wait_s: seconds spent inside ``__next__``.
        first_of_epoch: the first batch of this iterator (includes worker start-up).
        global_step: optimizer steps completed so far.
        time: ``time.perf_counter()`` when the batch was returned.
    """

    loader: LoaderInfo
    loader_id: int
    wait_s: float
    first_of_epoch: bool
    global_step: int
    time: float


@dataclass(frozen=True, slots=True)
class LossValue:
    """One loss value, read back from the device after the fact.

    Attributes:
        value: the loss as a Python float (NaN and Inf included).
        site: where ``backward()`` was called on it.
        index: the backward call's index.
        global_step: optimizer steps completed when it was computed.
    """

    value: float
    site: CallSite
    index: int
    global_step: int


@dataclass(frozen=True, slots=True)
class StepSample:
    """Host numbers of one sampled step of one optimizer, aligned with ``optimizer.params``.

    Attributes:
        optimizer: which optimizer.
        step: that optimizer's step count.
        global_step: the run's step.
        grad_norms: L2 norm of each gradient before the step (``None``: no gradient).
        param_norms: L2 norm of each parameter after the step (NaN/Inf: not finite).
        update_ratios: per parameter, the size of the step's change relative to the
            weights (``||after - before|| / ||before||``), measured on a fixed slice of at
            most a few thousand elements; ``None`` where the weights were zero.
        lrs: the learning rate of each parameter group at the step.
        group_of: the group index of each parameter.
    """

    optimizer: OptimizerInfo
    step: int
    global_step: int
    grad_norms: tuple[float | None, ...]
    param_norms: tuple[float, ...]
    update_ratios: tuple[float | None, ...] | None
    lrs: tuple[float, ...]
    group_of: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class WarningRecord:
    """A Python warning shown while the run was watched.

    Attributes:
        message: the warning's text.
        category: its class (``UserWarning``, ...).
        filename: file that ``warnings`` attributes it to (often inside torch).
        lineno: line in that file.
        user_site: the innermost frame of the user's code when it was raised.
        global_step: optimizer steps completed so far.
    """

    message: str
    category: type[Warning]
    filename: str
    lineno: int
    user_site: CallSite | None
    global_step: int


class MonitorView(Protocol):
    """What the monitor offers detectors (implemented by ``runtime.monitor.Monitor``)."""

    @property
    def global_step(self) -> int:
        """Optimizer steps completed so far (the largest count of any optimizer)."""

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
    def options(self) -> Any:
        """The run's ``MonitorOptions`` (``max_steps``, ``localise_non_finite``, ...)."""

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

    def is_user_file(self, path: str) -> bool:
        """Whether a file belongs to the user's code (not torch, torchdoctor or stdlib)."""

    def defer(self, tensors: Sequence[torch.Tensor] | torch.Tensor,
              callback: Callable[[list[float]], None]) -> None:
        """Read 0-d tensors (or one 1-D tensor) back later, without a sync now; call back.

        On the CPU the callback runs at once; on CUDA at a later step, or at the end of
        the run. It runs with the same failure isolation as the hooks.
        """

    def emit(self, finding: Finding) -> None:
        """Record a finding (replacing one with the same rule and place)."""

    def set_fact(self, key: str, value: Any) -> None:
        """Record a measured fact of the run, shown in the report."""

    def add_series(self, name: str, values: Sequence[float]) -> None:
        """Record a named sequence for plots."""


class RuntimeDetector:
    """Base class of runtime detectors; every hook is a no-op until overridden.

    Class attributes:
        wants_forward: receive :meth:`on_forward` for calls of root models (costs one
            Python call per model call, so only detectors that need it ask).
    """

    wants_forward: ClassVar[bool] = False

    monitor: MonitorView

    # Set by the monitor; a detector never replaces it.
    _sink: Callable[[Finding], None] | None = None

    @property
    def name(self) -> str:
        """The detector's name in reports (its class name)."""
        return type(self).__name__

    def emit(self, finding: Finding) -> None:
        """Report a finding. Emitting again for the same rule and place replaces it."""
        if self._sink is not None:
            self._sink(finding)

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

    def on_loss(self, loss: LossValue) -> None:
        """A loss value read back from the device (in backward order, possibly late)."""

    # -- events outside the loop ---------------------------------------------------------

    def on_warning(self, record: WarningRecord) -> None:
        """A Python warning was shown during the run."""

    def on_exception(self, exc: BaseException) -> None:
        """The watched code raised ``exc`` (``exc.__traceback__`` holds the frames)."""


# Hook names the monitor dispatches; a detector "uses" a hook when it overrides it.
HOOKS: tuple[str, ...] = (
    "on_model", "on_optimizer", "on_batch", "on_forward", "on_backward", "on_step_begin",
    "on_step_end", "on_sample", "on_loss", "on_warning", "on_exception", "on_finish",
)


def overridden_hooks(cls: type[RuntimeDetector]) -> frozenset[str]:
    """The hooks a detector class overrides (its dispatch entries)."""
    return frozenset(
        name for name in HOOKS if getattr(cls, name) is not getattr(RuntimeDetector, name)
    )

