"""Where a dependence between examples enters a forward pass.

:func:`find_entry` runs the forward on a batch and on a variant of it (see
:mod:`torchdoctor.preflight.independence`), watching every PyTorch op in execution order.
The entry is the first op whose output for the kept example differs between the two runs
although every tensor it read was the same for that example: the op that mixed examples
(a ``view`` across the batch dimension, a ``mean`` over it, a ``batch_norm`` with batch
statistics, an ``lstm`` running along the batch, attention over padded positions). The
two runs are paired op by op; where their sequences of ops part, the search stops. Only
called once the model's output has been seen to change, so its cost is paid on a finding.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchdoctor.preflight.failures import user_frame
from torchdoctor.preflight.independence import difference
from torchdoctor.preflight.tracing import ForwardTrace

if TYPE_CHECKING:
    from torchdoctor.preflight.batch import Batch

__all__ = ["Entry", "find_entry"]


@dataclass(frozen=True, slots=True)
class Entry:
    """The op where the kept example's values first changed.

    Attributes:
        op: the op's name (``view``, ``batch_norm``, ``lstm``).
        module: the innermost module running it (``""``: the root's own forward).
        frame: the user's line that ran it, when one is on the stack.
        input_shape: the shape of its first tensor input.
        change: the relative change of its output for the kept example.
        pairwise: a matrix product that read or made an examples-by-examples matrix (an
            adjacency, similarities of the examples): mixing them is its purpose.
    """

    op: str
    module: str
    frame: traceback.FrameSummary | None
    input_shape: tuple[int, ...]
    change: float
    pairwise: bool


@dataclass(slots=True)
class _Call:
    op: str
    inputs: list[list[Any]]  # per tensor, its candidate parts (see _Watch.parts)
    outputs: list[list[Any]]


def _candidates(tensor: Any, count: int, keep: int) -> list[Any]:
    parts = [
        tensor.select(dim, keep)
        for dim in (0, 1)
        if dim < tensor.dim() and tensor.shape[dim] == count
    ]
    return parts or [tensor]


def _changes(base: list[Any], other: list[Any]) -> list[float]:
    if len(base) != len(other):
        return [float("inf")]
    return [difference(a, b) for a, b in zip(base, other, strict=True)]


class _Watch:
    """Records every op's parts for the kept example, or compares them with a recording."""

    def __init__(
        self,
        trace: ForwardTrace,
        count: int,
        keep: int,
        against: list[_Call] | None = None,
        tol: float = 0.0,
    ) -> None:
        self.trace, self.count, self.keep = trace, count, keep
        self.against, self.tol = against, tol
        self.calls: list[_Call] = []
        self.entry: Entry | None = None
        self.stopped = False

    def mode(self) -> Any:
        from torch.overrides import TorchFunctionMode

        watch = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                if watch.stopped:
                    return func(*args, **kwargs)
                inputs = watch.parts((args, kwargs))  # before: in-place ops change them
                result = func(*args, **kwargs)
                outputs = watch.parts(result)
                if outputs:
                    call = _Call(getattr(func, "__name__", "op"), inputs, outputs)
                    watch.seen(call, (args, kwargs), result)
                return result

        return _Mode()

    def parts(self, value: Any) -> list[list[Any]]:
        """Per tensor, its candidate parts for the kept example: along dimension 0 and
        along dimension 1 where either is as long as the batch (an intermediate tensor
        does not say which runs over the examples: ``(batch, hidden)`` with hidden as
        long as the batch), else the whole tensor."""
        import torch

        # Parameters are the same in both runs: not copied, so big weights cost nothing.
        return [
            [part.detach().clone() for part in _candidates(t, self.count, self.keep)]
            for t in _tensors(value)
            if not isinstance(t, torch.nn.Parameter)
        ]

    def seen(self, call: _Call, args: Any, result: Any) -> None:
        if self.against is None:
            self.calls.append(call)
            return
        index = len(self.calls)
        self.calls.append(call)
        if index >= len(self.against) or self.against[index].op != call.op:
            self.stopped = True  # the two runs took different paths
            return
        base = self.against[index]
        if len(base.inputs) != len(call.inputs) or len(base.outputs) != len(call.outputs):
            self.stopped = True
            return
        pairs = zip(base.inputs, call.inputs, strict=True)
        if not all(min(_changes(a, b), default=0.0) <= self.tol for a, b in pairs):
            return  # an input of the kept example changed: the change came from before
        # An output changed for the kept example along every dimension it may run on.
        outputs = zip(base.outputs, call.outputs, strict=True)
        change = max((min(_changes(a, b), default=0.0) for a, b in outputs), default=0.0)
        if change > self.tol:
            first = next(iter(_tensors(args)), None)
            self.entry = Entry(
                call.op,
                self.trace.current_module or "",
                user_frame(traceback.extract_stack(), inside_model=True),
                tuple(first.shape) if first is not None else (),
                change,
                call.op in _PRODUCTS
                and any(_pairwise(t, self.count) for t in _tensors((args, result))),
            )
            self.stopped = True


# Matrix products: the ops that apply an examples-by-examples matrix (an adjacency, a
# similarity or attention over the batch) to the examples.
_PRODUCTS = frozenset(
    {"matmul", "mm", "bmm", "__matmul__", "__rmatmul__", "einsum", "addmm", "baddbmm", "spmm"}
)


def _pairwise(tensor: Any, count: int) -> bool:
    return tensor.dim() >= 2 and tuple(tensor.shape[-2:]) == (count, count)


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def find_entry(
    model: Any, run: Any, batch: Batch, variant: Batch, count: int, keep: int, tol: float
) -> Entry | None:
    """The first op that changes example ``keep``'s values between ``batch`` and
    ``variant``; ``run(batch)`` runs the forward. ``None`` when none is found (the change
    came through state the ops do not show, or the runs took different paths)."""
    import torch

    # Both runs start from the same buffers: a BatchNorm left in training mode updates
    # its running statistics, which the second run would otherwise read as a change.
    buffers = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    recorded = ForwardTrace(model)
    base = _Watch(recorded, count, keep)
    try:
        with recorded, base.mode():
            run(batch)
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        compared = ForwardTrace(model)
        watch = _Watch(compared, count, keep, against=base.calls, tol=tol)
        with compared, watch.mode():
            run(variant)
    except Exception:  # noqa: BLE001 - only the place of a finding is at stake
        return None
    return watch.entry
