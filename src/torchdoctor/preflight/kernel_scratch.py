"""Memory CPU kernels take for themselves inside an op, measured on this machine.

Live tensors do not show all of a CPU step's memory. Inside an op, oneDNN's convolutions
copy their input, weights and output into blocked layouts and a batch norm's backward
keeps a buffer of its input's size; all of it is freed before the op returns, so no
tensor shows it, yet the CPU allocator holds it at the step's peak. How much depends on
the kernel library, the CPU and the shapes (on torch 2.13 with oneDNN, a 3x3
convolution's forward takes its input's size again, its backward two to three times
it), so it is measured rather than modelled.

:func:`measure_scratch` runs the step for real on plain copies at two small batch sizes
under ``torch.profiler`` with ``profile_memory`` (the CPU allocator reports every
allocation and free). For each op it records the highest allocation over the bytes live
when the op started, its *transient* peak, outputs included. :class:`MeasuredScratch`
gives the forecast's tracker, for the same op of a step at batch size B, the line through
the two measurements (the buffers are as large as the batch; the weights' copies are
not). Ops are matched between the real and the fake step by name and by how many ops of
that name ran before them in the step; a dtype other than the measured one scales by
the element size. The same steps record the bytes of each op's new outputs: where a
real kernel keeps a larger output than the fake kernel returns (oneDNN's LSTM workspace,
empty on fake tensors), the tracker counts the real size. Where nothing can be
measured (the model is on another device or the ``meta`` device, copies of it and its
optimizer's state would take more than a quarter of the memory free now, a profiler is
already running, the step fails on real tensors) the forecast falls back to
:class:`ColumnScratch`, an estimate of a convolution backward's unfolded columns.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ColumnScratch", "MeasuredScratch", "measure_scratch"]

CALIBRATION_SIZES = (2, 4)
_Outputs = tuple[tuple[int, int], ...]  # (bytes, element size) of each output of an op


@dataclass(slots=True)
class MeasuredScratch:
    """Transient peaks of a step's ops, measured at two batch sizes.

    Attributes:
        sizes: the two batch sizes measured.
        peaks: ``(op, occurrence) -> (bytes at sizes[0], bytes at sizes[1], element
            size)`` for each op whose allocations exceeded its outputs.
        outputs: ``(op, occurrence) -> ((bytes, element size) of each output at
            sizes[0], the same at sizes[1])`` for ops that made new storages.
    """

    sizes: tuple[int, int]
    peaks: dict[tuple[str, int], tuple[int, int, int]]
    outputs: dict[tuple[str, int], tuple[_Outputs, _Outputs]] = field(default_factory=dict)
    batch_size: int = 0
    _seen: Counter[str] = field(default_factory=Counter)
    _current: tuple[str, int] | None = None

    method = "measured"

    def start(self, batch_size: int) -> None:
        """A step at ``batch_size`` begins: count ops from the first again."""
        self.batch_size = batch_size
        self._seen.clear()

    def __call__(self, func: Any, args: Any) -> int:
        name = str(func)
        key = self._current = (name, self._seen[name])
        self._seen[name] += 1
        measured = self.peaks.get(key)
        if measured is None:
            return 0
        at_low, at_high, element = measured
        size = self._at_batch(at_low, at_high)
        tensor = _first_tensor(args)
        if tensor is not None and tensor.element_size() != element:
            size *= tensor.element_size() / element
        return max(0, round(size))

    def output_bytes(self, index: int, tensor: Any) -> int:
        """The bytes output ``index`` (``tensor``) of the op last looked up took on real
        tensors, at this batch size and ``tensor``'s element size (0: not measured). A
        fake kernel can return less than the real one keeps: oneDNN's LSTM returns a
        workspace for its backward that is empty on fake tensors."""
        measured = self.outputs.get(self._current) if self._current is not None else None
        if measured is None or index >= min(len(measured[0]), len(measured[1])):
            return 0
        (at_low, element), (at_high, _) = measured[0][index], measured[1][index]
        size = self._at_batch(at_low, at_high) * int(tensor.element_size()) / element
        return max(0, round(size))

    def _at_batch(self, at_low: float, at_high: float) -> float:
        low, high = self.sizes
        return at_low + (at_high - at_low) * (self.batch_size - low) / (high - low)


class ColumnScratch:
    """The fallback estimate: a 2-d convolution's backward unfolds its input into
    columns (im2col), ``N x C_in/groups x kh x kw x H_out x W_out`` values."""

    method = "estimated (convolution columns)"

    def start(self, batch_size: int) -> None:
        """Nothing to reset."""

    def __call__(self, func: Any, args: Any) -> int:
        from torchdoctor.preflight.memory import cpu_kernel_scratch

        return cpu_kernel_scratch(func, args)


def _flat_tensors(value: Any) -> list[Any]:
    """The tensors in ``value``, through tuples, lists and dicts, in order (as the
    forecast's tracker walks an op's outputs)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = tuple(value.values())
    if isinstance(value, (tuple, list)):
        return [tensor for item in value for tensor in _flat_tensors(item)]
    return []


def _storage_ptr(tensor: Any) -> int:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return -1


def _first_tensor(args: Any) -> Any | None:
    import torch

    for value in args:
        if isinstance(value, torch.Tensor):
            return value
    return None


def measure_scratch(
    model: Any,
    optimizer: Any | None,
    loss_fn: Any,
    batch: Any,
    autocast: Callable[[], Any] | None = None,
) -> MeasuredScratch | None:
    """Measure the transient peaks of the step's ops on plain copies, at batch sizes 2 and
    4 (see the module doc); ``None`` when they cannot be measured here."""
    if not _measurable(model, batch) or not _affordable(model, optimizer):
        return None
    from torchdoctor.preflight.memory import LiveBytes
    from torchdoctor.preflight.memory_step import measure_step, real_copy, resize_batch

    try:
        copy = real_copy(model, optimizer, loss_fn, batch)
        low, high = CALIBRATION_SIZES

        def step(size: int) -> None:
            context = autocast() if autocast is not None else None
            with context if context is not None else contextlib.nullcontext():
                measure_step(copy, LiveBytes(), resize_batch(copy.batch, size, None))

        step(low)  # creates the optimizer's state, as the forecast's first step does
        (at_low, out_low), (at_high, out_high) = (
            _transient_peaks(lambda: step(low)),
            _transient_peaks(lambda: step(high)),
        )
    except Exception:  # noqa: BLE001 - the user's code on real copies; fall back
        return None
    peaks = {}
    for key in at_low.keys() | at_high.keys():
        element = (at_low.get(key) or at_high[key])[1]
        peaks[key] = (at_low.get(key, (0, 0))[0], at_high.get(key, (0, 0))[0], element)
    outputs = {key: (out_low[key], out_high[key]) for key in out_low.keys() & out_high.keys()}
    return MeasuredScratch((low, high), peaks, outputs)


def _measurable(model: Any, batch: Any) -> bool:
    import torch
    from torch.profiler import kineto_available

    from torchdoctor.preflight.batch import iter_tensors

    if not kineto_available() or torch._C._autograd._profiler_enabled():  # noqa: SLF001
        return False  # a profiler is running already (the user's): one at a time
    tensors = [
        *model.parameters(),
        *model.buffers(),
        *(tensor for _, tensor in iter_tensors(batch.inputs, "inputs")),
        *(tensor for _, tensor in iter_tensors(batch.targets, "targets")),
    ]
    return all(tensor.device.type == "cpu" for tensor in tensors)


def _affordable(model: Any, optimizer: Any | None) -> bool:
    """Whether plain copies of the model and its optimizer's state, and a step at batch
    size 4, fit easily in the memory free now (a model that fills the machine is not
    copied: the forecast exists to avoid running out of memory)."""
    import torch

    tensors = [*model.parameters(), *model.buffers()]
    if optimizer is not None:
        tensors += [
            value
            for state in optimizer.state.values()
            for value in state.values()
            if isinstance(value, torch.Tensor)
        ]
    held = sum(tensor.numel() * tensor.element_size() for tensor in tensors)
    free = _free_memory()
    return free is None or 4 * held < free


def _free_memory() -> int | None:
    """The memory the system can give now (Linux's ``MemAvailable``), or ``None``."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


_Key = tuple[str, int]


def _transient_peaks(
    run: Callable[[], None],
) -> tuple[dict[_Key, tuple[int, int]], dict[_Key, _Outputs]]:
    """Run ``run`` under the profiler. Returns ``(op, occurrence) -> (transient peak,
    element size)`` for every op that allocated more than it returned, and ``(op,
    occurrence) -> (bytes, element size) of each output`` (0 bytes for an output sharing
    an input's storage)."""
    from torch.profiler import ProfilerActivity, profile

    names: list[tuple[str, int, _Outputs]] = []
    profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        profiler.start()
        try:
            with _numbered_ops(names):
                run()
        finally:
            profiler.stop()
    events = list(profiler.profiler.kineto_results.events())  # type: ignore[union-attr]
    memory = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    times = [time for time, _ in memory]
    spans = {
        int(e.name()[len(_MARK) :]): (e.start_ns(), e.end_ns())
        for e in events
        if e.name().startswith(_MARK)
    }
    peaks: dict[_Key, tuple[int, int]] = {}
    outputs: dict[_Key, _Outputs] = {}
    occurrences: Counter[str] = Counter()
    for index, (name, element, produced) in enumerate(names):
        key = (name, occurrences[name])
        occurrences[name] += 1
        if any(size for size, _ in produced):
            outputs[key] = produced
        if index not in spans:
            continue
        start, end = spans[index]
        running = highest = 0
        for _, size in memory[bisect.bisect_left(times, start) : bisect.bisect_right(times, end)]:
            running += size
            highest = max(highest, running)
        if highest > max(running, 0):
            peaks[key] = (highest, element)
    return peaks, outputs


_MARK = "torchdoctor.op#"


@contextlib.contextmanager
def _numbered_ops(names: list[tuple[str, int, _Outputs]]) -> Iterator[None]:
    """Mark each op's span in the profile with its index in ``names`` (its name, its
    first tensor's element size, the bytes of the new storage of each output)."""
    with _numbering_class()(names):
        yield


@functools.cache
def _numbering_class() -> Any:
    """The dispatch mode of :func:`_numbered_ops` (built on first use: importing this
    module does not import torch)."""
    from torch.autograd.profiler import record_function
    from torch.utils._python_dispatch import TorchDispatchMode

    class Numbering(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __init__(self, names: list[tuple[str, int, _Outputs]]) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self._names = names

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            tensor = _first_tensor(args)
            index = len(self._names)
            self._names.append((str(func), tensor.element_size() if tensor is not None else 1, ()))
            with record_function(f"{_MARK}{index}"):
                out = func(*args, **(kwargs or {}))
            given = {_storage_ptr(t) for t in _flat_tensors((args, kwargs or {}))}
            produced = tuple(
                (0 if _storage_ptr(t) in given else t.untyped_storage().nbytes(), t.element_size())
                for t in _flat_tensors(out)
            )
            self._names[index] = (*self._names[index][:2], produced)
            return out

    return Numbering


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 while the profiler runs: kineto prints a line as it
    starts and stops, the CPU allocator one for a block freed that it did not see
    allocated; neither is the user's to read."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
