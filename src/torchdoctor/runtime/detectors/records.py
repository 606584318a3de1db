"""The records runtime detectors receive: call sites, models, optimizers and events.

All are frozen, slotted dataclasses built by the monitor; detectors read them and never
keep the tensors they lend (``BackwardEvent.loss``) past the hook. Re-exported by
:mod:`torchdoctor.runtime.detectors.base`, where the detector interface is documented.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from torchdoctor.findings import Location

if TYPE_CHECKING:  # torch is imported by the monitor when it runs, never here
    import torch

    from torchdoctor.runtime.sampler_reach import Reach

__all__ = [
    "BackwardEvent",
    "BatchEvent",
    "CallSite",
    "ForwardEvent",
    "LoaderInfo",
    "LossValue",
    "ModelInfo",
    "OptimizerInfo",
    "StepEvent",
    "StepSample",
    "WarningRecord",
    "maker",
]

T = TypeVar("T")


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
    # Detectors key their per-place state by call site at every backward pass: the hash
    # is computed once, not from the four fields at each lookup.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.path, self.line, self.function, self.user)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields: a string's hash differs from one process to another.
        return (CallSite, (self.path, self.line, self.function, self.user))

    def location(self, **extra: Any) -> Location:
        """This site as a :class:`Location`, with the source line as snippet when readable.

        A library's frame (a trainer's loop calling ``backward()``) is not a place the user
        can fix: the location then carries only ``extra`` (the object).
        """
        import linecache

        if not self.user:
            return Location(**extra)
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
    reach: Reach | None = None  # a sampler that can never draw part of the dataset
    drops: tuple[int, int, int] | None = None  # drop_last: (batches, batch size, dropped)


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
            weights (``||after - before|| / max(||before||, default init norm)``: weights
            far smaller than torch's default initialisation, such as a layer initialised
            to zero, are judged against that norm), measured on a fixed slice of at most
            a few thousand elements; ``None`` where both are zero (1-D zero tensors).
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


def maker(cls: type[T]) -> Callable[..., T]:
    """A constructor of the frozen, slotted dataclass ``cls`` for the monitor's hot path:
    every field given, in order, by position; the same object ``cls(...)`` builds, at a
    fraction of the cost (a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, 3-4x the time of filling the slots directly, here in one
    pass of C). No
    ``__post_init__`` runs: only for records that have none."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or any(not f.init for f in fields(cls)):  # type: ignore[arg-type]
        raise TypeError(f"{cls.__name__} needs its own __init__")
    namespace: dict[str, Any] = {
        "_new": object.__new__,
        "_cls": cls,
        "_slots": tuple(cls.__dict__[name] for name in names),
        "_set": type(cls.__dict__[names[0]]).__set__,  # (slot, record, value), in C
        "_drain": deque(maxlen=0).extend,
        "_repeat": repeat,
    }
    arguments = ", ".join(names)
    source = (
        f"def make({arguments}):\n    record = _new(_cls)\n"
        f"    _drain(map(_set, _slots, _repeat(record), ({arguments},)))\n    return record\n"
    )
    exec(source, namespace)  # noqa: S102 - built from the dataclass's own field names
    made: Callable[..., T] = namespace["make"]
    return made
