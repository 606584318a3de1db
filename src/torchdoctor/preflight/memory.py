"""Live bytes of a training step, counted tensor by tensor: the measuring tool of the model
summary and the memory forecast.

:class:`LiveBytes` is a ``TorchDispatchMode``: every tensor an op returns is looked at
once, by its storage (views and in-place results share a storage and cost nothing more).
A new storage adds its size, rounded by the target device's allocator model, to the live
total; a ``weakref.finalize`` on the storage takes it off when torch frees it. The peak of
the total, and its breakdown by category at that moment, is what a caching allocator's
``max_memory_allocated`` reports for the same sequence of allocations.

Categories: ``parameters`` (parameters and buffers), ``batch`` (the inputs and targets),
``gradients`` (a parameter's ``.grad``, from the moment it is accumulated),
``optimizer_state`` (tensors the optimizer keeps in ``optimizer.state``), ``activations``
(tensors autograd saved for backward, seen by ``saved_tensors_hooks``) and
``temporaries`` (every other live tensor: layer outputs not kept for backward, incoming
gradients during backward, an optimizer's scratch tensors).

It works the same on real tensors and on fake ones (``FakeTensorMode``, where no byte is
allocated), which is how the forecast is checked against a real run.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CATEGORIES",
    "PHASE",
    "LiveBytes",
    "allocator_rounding",
    "cpu_kernel_scratch",
    "storage_of",
]

CATEGORIES = ("parameters", "batch", "gradients", "optimizer_state", "activations", "temporaries")

# The CUDA caching allocator hands out blocks in multiples of 512 bytes (its smallest block
# is 512 bytes); `max_memory_allocated` counts those block sizes. The CPU allocator counts
# the bytes asked for.
_CUDA_BLOCK = 512


def allocator_rounding(device_type: str) -> Callable[[int], int]:
    """The bytes an allocation of ``n`` bytes takes on ``device_type`` ("cuda", "cpu")."""
    if device_type == "cuda":
        return lambda n: 0 if n == 0 else -(-n // _CUDA_BLOCK) * _CUDA_BLOCK
    return lambda n: n


def cpu_kernel_scratch(func: Any, args: Any) -> int:
    """Bytes a CPU kernel allocates for itself: the backward of a 2-d convolution unfolds
    its input into columns (im2col), ``N x C_in/groups x kh x kw x H_out x W_out`` values;
    a 1x1 convolution of stride 1 needs none."""
    import torch

    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    # dilation, transposed, output_padding, groups, output_mask)
    if func is not torch.ops.aten.convolution_backward.default or len(args) < 10:
        return 0
    grad_out, inputs, weight = args[0], args[1], args[2]
    stride, transposed, groups = args[4], args[7], args[9]
    if transposed or weight.dim() != 4 or inputs.dim() != 4:
        return 0
    kernel = int(weight.shape[2]) * int(weight.shape[3])
    if kernel == 1 and all(int(s) == 1 for s in stride):
        return 0
    per_group = int(inputs.shape[1]) // max(1, int(groups))
    positions = int(grad_out.shape[2]) * int(grad_out.shape[3])
    return int(inputs.shape[0]) * per_group * kernel * positions * int(inputs.element_size())


def storage_of(tensor: Any) -> Any | None:
    """The untyped storage behind ``tensor`` (``None`` for tensors without one)."""
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError, AttributeError):
        return None


@dataclass(slots=True)
class _Entry:
    bytes: int
    category: str
    module: str | None = None
    alive: bool = True


# In LiveBytes.events: the step's optimizer phase starts here (its blocks are shaped like
# the parameters, the forward's and backward's like the batch).
PHASE: tuple[Any, int] = (None, 0)


@dataclass(slots=True)
class _Counts:
    live: int = 0
    by_category: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    by_module: dict[str, int] = field(default_factory=dict)


def _tensors(value: Any) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


class LiveBytes:
    """Counts the bytes of live tensor storages while it is active.

    Use :meth:`active` around the work to measure. :meth:`track` registers tensors that
    exist before (parameters, the batch) or gives a tensor a category (a gradient after
    it is accumulated). :attr:`peak` and :attr:`peak_breakdown` hold the highest total
    since the last :meth:`reset_peak`.
    """

    def __init__(
        self,
        rounding: Callable[[int], int] | None = None,
        scratch: Callable[[Any, Any], int] | None = None,
    ) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self._round = rounding or (lambda n: n)
        # Bytes an op allocates inside its kernel and frees before returning (no tensor
        # shows them): counted as a temporary on top of the live total while it runs.
        self.scratch = scratch
        self._entries: Any = WeakIdKeyDictionary()
        self._counts = _Counts()
        self.module: str | None = None  # the module whose forward is running
        self.peak = 0
        self.peak_breakdown: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        # Every allocation and free since the last reset_peak, in order: what the C
        # allocator's model (heap_model.retained_bytes) replays.
        self.events: list[tuple[_Entry, int]] = []

    @property
    def live(self) -> int:
        """Bytes of every tracked storage still alive."""
        return self._counts.live

    def breakdown(self) -> dict[str, int]:
        """Live bytes per category now."""
        return dict(self._counts.by_category)

    def module_activations(self) -> dict[str, int]:
        """Live bytes saved for backward, per module path (innermost running module)."""
        return {name: size for name, size in self._counts.by_module.items() if size}

    def reset_peak(self) -> None:
        """Start a new peak from the live total now."""
        self.peak = self._counts.live
        self.peak_breakdown = self.breakdown()
        self.events = []

    def track(
        self,
        tensor: Any,
        category: str,
        module: str | None = None,
        *,
        recategorise: bool = True,
        at_least: int = 0,
    ) -> None:
        """Count ``tensor``'s storage (once) and give it ``category``.

        An ``activations`` category is given only to a storage that is a temporary so
        far: a saved parameter or input stays what it is. Without ``recategorise`` a
        storage already counted keeps its category (an in-place op's result). A new
        storage counts at least ``at_least`` bytes (what the real kernel's output takes
        where the fake one is smaller).
        """
        storage = storage_of(tensor)
        if storage is None:
            return
        entry = self._entries.get(storage)
        if entry is not None and not recategorise:
            return
        if entry is None:
            entry = _Entry(self._round(max(int(storage.nbytes()), at_least)), category, module)
            self._entries[storage] = entry
            weakref.finalize(storage, self._free, entry)
            self._add(entry, 1)
            self.events.append((entry, 1))
            return
        if category == "activations" and entry.category != "temporaries":
            return
        if entry.category != category:
            self._add(entry, -1)
            entry.category, entry.module = category, module
            self._add(entry, 1)

    def _add(self, entry: _Entry, sign: int) -> None:
        counts = self._counts
        counts.live += sign * entry.bytes
        counts.by_category[entry.category] += sign * entry.bytes
        if entry.category == "activations" and entry.module is not None:
            counts.by_module[entry.module] = counts.by_module.get(entry.module, 0) + (
                sign * entry.bytes
            )
        if sign > 0 and counts.live > self.peak:
            self.peak = counts.live
            self.peak_breakdown = dict(counts.by_category)

    def transient(self, size: int) -> None:
        """An op holds ``size`` more bytes while it runs (kernel scratch): the peak
        counts them on top of what is live, as temporaries."""
        if size <= 0:
            return
        scratch = _Entry(size, "temporaries", alive=False)
        self.events += [(scratch, 1), (scratch, -1)]
        if self._counts.live + size > self.peak:
            self.peak = self._counts.live + size
            self.peak_breakdown = dict(self._counts.by_category)
            self.peak_breakdown["temporaries"] += size

    def _free(self, entry: _Entry) -> None:
        if entry.alive:
            entry.alive = False
            self._add(entry, -1)
            self.events.append((entry, -1))

    @contextmanager
    def active(self, model: Any = None) -> Iterator[LiveBytes]:
        """Count every op's outputs; with ``model``, attribute saved tensors to the module
        whose forward is running."""
        import torch

        with ExitStack() as stack:
            if model is not None:
                stack.callback(_attribution_hooks(self, model))
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack))
            stack.enter_context(_dispatch_class()(self))
            yield self

    def _pack(self, tensor: Any) -> Any:
        self.track(tensor, "activations", self.module)
        return tensor


def _unpack(tensor: Any) -> Any:
    return tensor


def _attribution_hooks(tracker: LiveBytes, model: Any) -> Callable[[], None]:
    """Forward hooks that keep ``tracker.module`` on the innermost running module; returns
    the function that removes them."""
    stack: list[str | None] = []
    handles = []

    def enter(path: str) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            stack.append(tracker.module)
            tracker.module = path

        return hook

    def leave(*_: Any) -> None:
        tracker.module = stack.pop() if stack else None

    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(enter(path)))
        handles.append(module.register_forward_hook(leave, always_call=True))

    def remove() -> None:
        for handle in handles:
            handle.remove()
        tracker.module = None

    return remove


@functools.cache
def _dispatch_class() -> Any:
    """The dispatch mode that shows :class:`LiveBytes` every op's outputs (built on first
    use, so importing this module does not import torch)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Dispatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __init__(self, tracker: LiveBytes) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self._tracker = tracker

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if self._tracker.scratch is not None:
                self._tracker.transient(self._tracker.scratch(func, args))
            out = func(*args, **(kwargs or {}))
            real_bytes = getattr(self._tracker.scratch, "output_bytes", None)
            for index, tensor in enumerate(_tensors(out)):
                self._tracker.track(
                    tensor,
                    "temporaries",
                    recategorise=False,
                    at_least=real_bytes(index, tensor) if real_bytes is not None else 0,
                )
            return out

    return Dispatch
