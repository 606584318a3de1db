"""Where the copies of modules made during a run come from, and cheap fingerprints of them.

An EMA model, an RL target network, a mean teacher, a "best" snapshot: each is usually
made by ``copy.deepcopy(model)`` (``AveragedModel`` and most EMA helpers call it too).
:class:`CopyOrigins` gives ``nn.Module`` a ``__deepcopy__`` for the run that does exactly
what ``copy.deepcopy`` does without one (``__reduce_ex__(4)``, then ``copy._reconstruct``)
and, for the outermost module of each copy, records the source, the copy and the user's
line. The copy keeps no reference to torchdoctor (the method lives on the class, and is
removed at the end of the run); the record holds both modules weakly.

:func:`fingerprint` reads the first values of a module's first parameters: their exact
bits (to tell "never changed" from "changed slowly": an EMA with decay 0.999 moves every
value a little at each step) and their values as float32 (to measure distances).
"""

from __future__ import annotations

import copy
import copyreg
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import raised_by_signal_handler
from torchdoctor._usercode import is_torchdoctor_file
from torchdoctor.runtime.patches import Patches

if TYPE_CHECKING:  # the detectors package imports this module: no cycle at run time
    from torchdoctor.runtime.detectors.base import CallSite

__all__ = [
    "CopyOrigins",
    "restore_parametrized_copies",
    "CopyRecord",
    "fingerprint",
    "parameters_of",
    "write_count",
]

_RECORDS = 64  # live copies remembered (a snapshot taken at every improvement replaces one)
_PARAMS = 16  # parameters read by a fingerprint
_VALUES = 64  # values read per parameter
_INT_OF_SIZE = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


@dataclass(frozen=True, slots=True)
class CopyRecord:
    """One ``copy.deepcopy`` of a module, made while the run was watched."""

    copy: weakref.ref[Any]
    source: weakref.ref[Any]
    site: CallSite | None
    step: int


class CopyOrigins:
    """Records the modules that ``copy.deepcopy`` makes while the run is watched."""

    def __init__(
        self,
        site: Callable[[FrameType], CallSite | None],
        step: Callable[[], int],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self.records: list[CopyRecord] = []
        self.made = 0  # copies recorded so far
        self._site = site
        self._step = step
        self._on_error = on_error
        self._depth = threading.local()  # nesting of module copies in this thread

    def install(self, patches: Patches) -> bool:
        """Give ``nn.Module`` the recording ``__deepcopy__`` (not when it has one)."""
        import torch

        return patches.add(torch.nn.Module, "__deepcopy__", self._method(patches))

    def _method(self, patches: Patches) -> Callable[[Any, dict[int, Any]], Any]:
        origins = self

        def __deepcopy__(module: Any, memo: dict[int, Any]) -> Any:
            depth = getattr(origins._depth, "value", 0)
            origins._depth.value = depth + 1
            try:
                made = _plain_deepcopy(module, memo)
            finally:
                origins._depth.value = depth
            if depth == 0 and made is not module and patches.live():
                try:
                    origins._made(module, made, sys._getframe(1))
                except Exception as error:  # noqa: BLE001 - never break the user's copy
                    if raised_by_signal_handler(error):
                        raise
                    patches.active = False
                    origins._on_error(error)
            return made

        return __deepcopy__

    def _made(self, source: Any, made: Any, frame: FrameType) -> None:
        if _by_torchdoctor(frame):
            return  # our own copies (a dataset cloned to replay a worker) are not the user's
        self.records = [r for r in self.records if r.copy() is not None][-_RECORDS + 1 :]
        self.made += 1
        self.records.append(
            CopyRecord(weakref.ref(made), weakref.ref(source), self._site(frame), self._step())
        )

    def record_of(self, module: Any) -> CopyRecord | None:
        """The record of the copy ``module``, if ``copy.deepcopy`` made it."""
        return next((r for r in self.records if r.copy() is module), None)


def _by_torchdoctor(frame: FrameType | None) -> bool:
    """Whether the first frame outside the ``copy`` module is torchdoctor's."""
    while frame is not None and frame.f_code.co_filename == copy.__file__:
        frame = frame.f_back
    return frame is not None and is_torchdoctor_file(frame.f_code.co_filename)


def _plain_deepcopy(module: Any, memo: dict[int, Any]) -> Any:
    """What ``copy.deepcopy`` does for an object without ``__deepcopy__``."""
    if _parametrized_class(type(module)):
        return _copy_of_dict(module, memo)
    reductor = copyreg.dispatch_table.get(type(module))
    reduced = reductor(module) if reductor is not None else module.__reduce_ex__(4)
    if isinstance(reduced, str):
        return module
    return copy._reconstruct(module, memo, *reduced)  # type: ignore[attr-defined]


def restore_parametrized_copies() -> None:
    """Give every class ``torch.nn.utils.parametrize`` made while the recording
    ``__deepcopy__`` was on ``nn.Module`` the ``__deepcopy__`` torch gives such a class
    when its base has none: it saw ours and made none, and its ``__getstate__`` refuses to
    run, so without this a deep copy after the run would fail. Call it once ours is gone."""
    import torch

    pending = list(torch.nn.Module.__subclasses__())
    seen: set[type] = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        pending.extend(cls.__subclasses__())
        if _parametrized_class(cls) and not hasattr(cls, "__deepcopy__"):
            cls.__deepcopy__ = _parametrized_deepcopy  # type: ignore[attr-defined]


def _parametrized_deepcopy(module: Any, memo: dict[int, Any]) -> Any:
    made = memo.get(id(module))
    return made if made is not None else _copy_of_dict(module, memo)


def _parametrized_class(cls: type) -> bool:
    """Whether ``cls`` was made by ``torch.nn.utils.parametrize``: made while the run is
    watched, it did not get the ``__deepcopy__`` torch gives it when its base class has
    none (it saw ours), and its ``__getstate__`` refuses to run."""
    getstate = vars(cls).get("__getstate__")
    return getattr(getstate, "__module__", None) == "torch.nn.utils.parametrize"


def _copy_of_dict(module: Any, memo: dict[int, Any]) -> Any:
    """A new object of the same class with a deep copy of ``__dict__`` and of the slots:
    what parametrize's own ``__deepcopy__`` does."""
    cls: Any = type(module)
    made = cls.__new__(cls)
    memo[id(module)] = made
    made.__dict__ = copy.deepcopy(module.__dict__, memo)
    for name in copyreg._slotnames(cls):  # type: ignore[attr-defined]
        if hasattr(module, name):
            setattr(made, name, copy.deepcopy(getattr(module, name), memo))
    return made


def parameters_of(module: Any) -> list[Any]:
    """The module's floating, non-empty parameters, in ``parameters()`` order."""
    return [
        p
        for p in module.parameters()
        if p.is_floating_point() and p.numel() and not p.is_sparse and p.device.type != "meta"
    ]


def write_count(params: list[Any]) -> int:
    """The sum of the parameters' version counters: it grows with every in-place write
    (an optimizer step, ``copy_``, ``lerp_``, ``load_state_dict``), not through ``.data``."""
    return sum(p._version for p in params)


def fingerprint(params: list[Any]) -> tuple[Any, Any]:
    """The exact bits (as int64) and the float32 values of the first values of the first
    parameters, concatenated, on the first parameter's device."""
    import torch

    chosen = params[:_PARAMS]
    device = chosen[0].device
    with torch.no_grad():
        slices = [p.detach().reshape(-1)[:_VALUES].to(device) for p in chosen]
        bits = torch.cat([_bits(torch, s) for s in slices])
        values = torch.cat([s.float() for s in slices])
    return bits, values


def _bits(torch: Any, values: Any) -> Any:
    """The values' bit patterns as int64: equal exactly when the bytes are equal."""
    name = _INT_OF_SIZE.get(values.element_size())
    if name is None:
        return values.float().view(torch.int32).to(torch.int64)
    return values.contiguous().view(getattr(torch, name)).to(torch.int64)
