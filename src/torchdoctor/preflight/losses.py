"""What kind of loss the user passed, and what it really receives.

:func:`recognise_loss` names the loss from the object alone: ``nn`` loss modules,
``functools.partial`` of a functional, and the functionals themselves
(``F.cross_entropy``). :class:`LossRecorder` goes further: while the user's loss runs, it
records the first call of a known loss functional with the tensors it received, so a
wrapper (``lambda out, y: F.cross_entropy(out.softmax(1), y)``) is seen through too.
"""

from __future__ import annotations

import enum
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ClassIndexOutOfRange",
    "LossCall",
    "LossKind",
    "LossRecorder",
    "LossSpec",
    "recognise_loss",
]


class LossKind(enum.Enum):
    """Families of loss functions whose expectations the probes know."""

    CROSS_ENTROPY = "cross_entropy"  # logits [N, C, ...] + class indices or probabilities
    NLL = "nll"  # log-probabilities + class indices
    BCE = "bce"  # probabilities + float targets in [0, 1]
    BCE_WITH_LOGITS = "bce_with_logits"  # logits + float targets in [0, 1]
    REGRESSION = "regression"  # MSE, L1, smooth L1, Huber: elementwise, same shapes
    OTHER = "other"

    @property
    def classifies(self) -> bool:
        """Whether targets are class indices (cross-entropy and NLL)."""
        return self in (LossKind.CROSS_ENTROPY, LossKind.NLL)

    @property
    def elementwise(self) -> bool:
        """Whether output and target must have the same shape."""
        return self in (LossKind.BCE, LossKind.BCE_WITH_LOGITS, LossKind.REGRESSION)


_MODULE_KINDS = {
    "CrossEntropyLoss": LossKind.CROSS_ENTROPY,
    "NLLLoss": LossKind.NLL,
    "BCELoss": LossKind.BCE,
    "BCEWithLogitsLoss": LossKind.BCE_WITH_LOGITS,
    "MSELoss": LossKind.REGRESSION,
    "L1Loss": LossKind.REGRESSION,
    "SmoothL1Loss": LossKind.REGRESSION,
    "HuberLoss": LossKind.REGRESSION,
}

_FUNCTION_KINDS = {
    "cross_entropy": LossKind.CROSS_ENTROPY,
    "nll_loss": LossKind.NLL,
    "binary_cross_entropy": LossKind.BCE,
    "binary_cross_entropy_with_logits": LossKind.BCE_WITH_LOGITS,
    "mse_loss": LossKind.REGRESSION,
    "l1_loss": LossKind.REGRESSION,
    "smooth_l1_loss": LossKind.REGRESSION,
    "huber_loss": LossKind.REGRESSION,
}


@dataclass(frozen=True, slots=True)
class LossSpec:
    """A recognised loss: its kind and the options that change what it expects."""

    kind: LossKind
    name: str
    reduction: str = "mean"
    ignore_index: int = -100
    label_smoothing: float = 0.0


def _functional(name: str) -> Any:
    import torch.nn.functional as F

    return getattr(F, name)


def recognise_loss(loss_fn: Any) -> LossSpec:
    """Name the kind of ``loss_fn`` without calling it."""
    import torch.nn as nn

    keywords: dict[str, Any] = {}
    while isinstance(loss_fn, functools.partial):
        keywords = {**loss_fn.keywords, **keywords}
        loss_fn = loss_fn.func
    if isinstance(loss_fn, nn.Module):
        for klass in type(loss_fn).__mro__:
            kind = _MODULE_KINDS.get(klass.__name__)
            if kind is not None and klass.__module__.startswith("torch.nn"):
                return _spec(kind, klass.__name__, vars(loss_fn))
        return LossSpec(LossKind.OTHER, type(loss_fn).__name__)
    for name, kind in _FUNCTION_KINDS.items():
        if loss_fn is _functional(name):
            return _spec(kind, f"F.{name}", keywords)
    return LossSpec(LossKind.OTHER, getattr(loss_fn, "__qualname__", type(loss_fn).__name__))


def _spec(kind: LossKind, name: str, options: dict[str, Any]) -> LossSpec:
    return LossSpec(
        kind,
        name,
        reduction=str(options.get("reduction", "mean")),
        ignore_index=int(options.get("ignore_index", -100)),
        label_smoothing=float(options.get("label_smoothing", 0.0)),
    )


@dataclass(slots=True)
class LossCall:
    """The first known loss functional the user's loss called, with its arguments."""

    spec: LossSpec
    input: Any
    target: Any
    options: dict[str, Any] = field(default_factory=dict)


class ClassIndexOutOfRange(Exception):  # noqa: N818 - raised instead of running the loss
    """A cross-entropy/NLL call was about to receive class indices outside ``0..C-1``.

    Raised before the loss runs: on CUDA that call would end in a device-side assert that
    leaves the whole process unable to use the GPU.
    """

    def __init__(self, call: LossCall, low: int, high: int, classes: int) -> None:
        super().__init__(
            f"Target {high if high >= classes else low} is out of bounds (classes 0..{classes - 1})"
        )
        self.call, self.low, self.high, self.classes = call, low, high, classes


def _index_range(call: LossCall) -> tuple[int, int, int] | None:
    """``(min, max, classes)`` of class-index targets that fall out of range, else None."""
    from torch._subclasses.fake_tensor import FakeTensor

    scores, target = call.input, call.target
    if (
        isinstance(target, FakeTensor)  # a memory forecast's step: no values to read
        or getattr(target, "is_meta", False)
        or not call.spec.kind.classifies
        or not hasattr(target, "is_floating_point")
        or target.is_floating_point()
        or target.shape == scores.shape
        or scores.dim() == 0
        or target.numel() == 0
    ):
        return None
    classes = int(scores.shape[1] if scores.dim() >= 2 else scores.shape[0])
    kept = target[target != call.spec.ignore_index]
    if kept.numel() == 0:
        return None
    low, high = int(kept.min()), int(kept.max())
    return (low, high, classes) if low < 0 or high >= classes else None


def _make_recorder() -> Any:
    from torch.overrides import TorchFunctionMode

    class _Recorder(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.call: LossCall | None = None

        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in _FUNCTION_KINDS and func is _functional(name):
                call = _bind(func, name, args, kwargs)
                self.call = self.call or call
                out_of_range = _index_range(call)
                if out_of_range is not None:
                    raise ClassIndexOutOfRange(call, *out_of_range)
            return func(*args, **kwargs)

    return _Recorder()


def _bind(func: Any, name: str, args: Any, kwargs: dict[str, Any]) -> LossCall:
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    options = dict(bound.arguments)
    spec = _spec(_FUNCTION_KINDS[name], f"F.{name}", options)
    return LossCall(spec, options.pop("input"), options.pop("target"), options)


class LossRecorder:
    """Context manager: record the first known loss functional called inside it.

    It also refuses to run a cross-entropy or NLL call whose class indices are out of
    range, raising :class:`ClassIndexOutOfRange` instead (see there why).

    Example::

        with LossRecorder() as recorder:
            loss = loss_fn(output, target)
        recorder.call  # LossCall or None
    """

    def __init__(self) -> None:
        self._mode = _make_recorder()

    @property
    def call(self) -> LossCall | None:
        """The recorded call, or ``None`` when no known loss functional ran."""
        return self._mode.call  # type: ignore[no-any-return]

    def __enter__(self) -> LossRecorder:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._mode.__exit__(*exc_info)
