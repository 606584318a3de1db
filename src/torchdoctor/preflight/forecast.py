"""Will batch size B fit on the device? The peak-memory forecast of one training step.

One training step (forward, loss, backward, optimizer step) is run on a fake copy of the
user's objects (:mod:`torchdoctor.preflight.memory_step`) while
:class:`~torchdoctor.preflight.memory.LiveBytes` counts live tensor bytes, rounded the way
the target device's allocator rounds them (CUDA: 512-byte blocks). A first step creates
the optimizer's state; every measured step after it runs with that state alive, as
training does from its second step on. For each batch size the forecast gives the peak
and its breakdown (parameters, gradients, optimizer state, activations saved for
backward, temporaries and the batch, at the moment of the peak) and whether it fits.

The largest batch size that fits is extrapolated linearly from the measured points
(activations and temporaries grow with the batch, the rest does not), then measured
again at that size and corrected, so the answer is a measured one. The search stops at
64 times the largest requested batch size: a step that still fits there is reported as
fitting *at least* that batch (``largest_is_bound``), not as a measured limit. The usual
remedies are measured the same way at the largest requested batch size, each against the
peak of that same batch size measured just before it; a remedy that saves less than 1% of
that peak is not shown.

On the CPU the question is whether the training fits in RAM, so the peak is the
process's *resident* peak, over its resident size before the model and data were made
(after ``import torch``): the CPU allocator's peak (live tensors plus the memory kernels
take inside an op, measured for the step's own ops on plain copies at batch sizes 2 and 4,
:mod:`torchdoctor.preflight.kernel_scratch`), plus ``heap_retained``, the freed heap glibc
keeps (:mod:`torchdoctor.preflight.heap_model`), plus ``process``, what a fresh process
pays once to build an optimizer and run its first steps (lazy imports, code paged in;
:mod:`torchdoctor.preflight.process_cost`). Both are in the breakdown; the allocator's
peak is the peak less them (docs/forecast.md gives the measured accuracy).

What "fits" means: the peak is at most the device's memory, less 5% for the allocator's
fragmentation and, on CUDA, less 512 MiB for the CUDA context and library workspaces
(neither is counted by ``torch.cuda.max_memory_allocated``, which the peak predicts).
The step runs on the CPU's kernels: on CUDA, an op that picks another kernel (a fused
attention, cuDNN's workspace) can keep different tensors, and CUDA optimizers default to
their ``foreach`` implementation, which the forecast copies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.errors import UsageError

__all__ = [
    "Forecast",
    "ForecastOptions",
    "ForecastPoint",
    "Remedy",
    "forecast_memory",
    "parse_bytes",
]

_CUDA_CONTEXT = 512 * 2**20
_FRAGMENTATION = 0.05
_MAX_BATCH = 2**24
_SEARCH_FACTOR = 64  # the largest batch searched, as a multiple of the largest asked
_MIN_SAVING = 0.01  # a remedy saving less than this share of the peak is not shown
_CPU_PEAK = (
    "; the peak is the process's resident size over its size before the model and data"
    " were made: the CPU allocator's peak, the freed heap glibc keeps (heap_retained) and"
    " the process's one-time cost, measured in a fresh process (process)"
)
_NO_PROCESS = "; the process's one-time cost was not measured (it needs Linux's /proc)"
_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(text: str) -> int:
    """``"80GiB"``, ``"80GB"``, ``"512MiB"`` or a plain number of bytes.

    Raises:
        UsageError: not a size.
    """
    cleaned = text.strip().lower().replace(" ", "")
    number = cleaned.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = cleaned[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or value <= 0:
        raise UsageError(f"cannot read {text!r} as a memory size; write e.g. 80GiB, 24GB or 512MiB")
    return int(value * _UNITS[unit])


@dataclass(frozen=True, slots=True)
class ForecastOptions:
    """What to forecast.

    Attributes:
        device: the device type training will use (``"cuda"`` or ``"cpu"``).
        batch_sizes: the batch sizes to measure; empty: the probe batch's size.
        device_memory: the device's memory in bytes; ``None``: detect it (when this
            machine has that device).
        amp: ``"bf16"`` or ``"fp16"`` when training runs under autocast, else ``None``.
        remedies: also measure the usual remedies.
    """

    device: str = "cuda"
    batch_sizes: tuple[int, ...] = ()
    device_memory: int | None = None
    amp: str | None = None
    remedies: bool = True

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise UsageError(f"--forecast takes cuda or cpu, not {self.device!r}")
        if self.amp not in (None, "bf16", "fp16"):
            raise UsageError(f"--amp takes bf16 or fp16, not {self.amp!r}")
        if any(size < 1 for size in self.batch_sizes):
            raise UsageError("batch sizes must be positive")


@dataclass(frozen=True, slots=True)
class ForecastPoint:
    """The measured step at one batch size."""

    batch_size: int
    peak_bytes: int
    fits: bool | None
    breakdown: dict[str, int]

    def to_fact(self) -> dict[str, Any]:
        """``{batch_size, peak_bytes, fits, breakdown}``."""
        return {
            "batch_size": self.batch_size,
            "peak_bytes": self.peak_bytes,
            "fits": self.fits,
            "breakdown": dict(self.breakdown),
        }


@dataclass(frozen=True, slots=True)
class Remedy:
    """A change measured at one batch size, against the peak of that batch size.

    Attributes:
        name: what to change.
        batch_size: the (effective) batch size it was measured for.
        peak_bytes: the step's peak with the change.
        saving_bytes: the baseline's peak less ``peak_bytes`` (positive: it saves).
        fits: whether the peak with the change fits (``None``: memory unknown).
    """

    name: str
    batch_size: int
    peak_bytes: int
    saving_bytes: int
    fits: bool | None

    def to_fact(self) -> dict[str, Any]:
        """``{name, batch_size, peak_bytes, saving_bytes, fits}``."""
        return {
            "name": self.name,
            "batch_size": self.batch_size,
            "peak_bytes": self.peak_bytes,
            "saving_bytes": self.saving_bytes,
            "fits": self.fits,
        }


@dataclass(frozen=True, slots=True)
class Forecast:
    """The forecast: measured points, the largest batch that fits, remedies.

    Attributes:
        options: what was asked.
        points: one per batch size asked, in order.
        device_memory: the device memory compared against (``None``: unknown).
        usable_bytes: the part of it a step may use (see the module doc).
        largest_batch_size: the largest batch size measured to fit, or ``None``.
        largest_is_bound: the step still fits at ``largest_batch_size``, the end of the
            search (64 times the largest batch asked): larger ones may fit too.
        per_sample_bytes: the growth of the peak per sample (the fitted slope).
        top_modules: ``(module, bytes)`` with the most activation memory at the end of
            the forward at the largest batch size (the root shows as its class name).
        remedies: the usual remedies that save memory, measured at ``remedy_batch_size``.
        remedy_batch_size: the batch size the remedies are measured for (the largest
            asked), and ``remedy_baseline_bytes`` its peak, which they are compared with.
        error: why the step could not be measured, or ``None``.
        kernel_scratch: on the CPU, how the memory kernels take inside an op was found
            (``"measured"`` or the fallback estimate's name); ``None`` on CUDA.
        process_measured: on the CPU, whether the process's one-time cost was measured
            (it needs Linux's ``/proc``; not measured, it counts 0); ``None`` on CUDA.
    """

    options: ForecastOptions
    points: tuple[ForecastPoint, ...] = ()
    device_memory: int | None = None
    usable_bytes: int | None = None
    largest_batch_size: int | None = None
    per_sample_bytes: float | None = None
    top_modules: tuple[tuple[str, int], ...] = ()
    remedies: tuple[Remedy, ...] = field(default=())
    error: str | None = None
    largest_is_bound: bool = False
    remedy_batch_size: int | None = None
    remedy_baseline_bytes: int | None = None
    kernel_scratch: str | None = None
    process_measured: bool | None = None

    def to_facts(self) -> dict[str, Any]:
        """``forecast`` (the points) and ``forecast_detail`` (everything else)."""
        detail = {
            "device": self.options.device,
            "amp": self.options.amp,
            "device_memory": self.device_memory,
            "usable_bytes": self.usable_bytes,
            "largest_batch_size": self.largest_batch_size,
            "largest_is_bound": self.largest_is_bound,
            "per_sample_bytes": (
                None if self.per_sample_bytes is None else round(self.per_sample_bytes, 1)
            ),
            "top_modules": [
                {"module": name, "activation_bytes": size} for name, size in self.top_modules
            ],
            "remedies": [remedy.to_fact() for remedy in self.remedies],
            "remedy_batch_size": self.remedy_batch_size,
            "remedy_baseline_bytes": self.remedy_baseline_bytes,
            "method": "fake tensors, live bytes by storage"
            + (", CUDA 512-byte blocks" if self.options.device == "cuda" else "")
            + (f", CPU kernel scratch {self.kernel_scratch}" if self.kernel_scratch else "")
            + (_CPU_PEAK if self.options.device == "cpu" else "")
            + (_NO_PROCESS if self.process_measured is False else ""),
        }
        if self.error:
            detail["error"] = self.error
        return {"forecast": [point.to_fact() for point in self.points], "forecast_detail": detail}


def detected_memory(device: str) -> int | None:
    """This machine's memory for ``device``: the first CUDA device's, or physical RAM."""
    import os

    import torch

    if device == "cuda":
        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(0).total_memory)
        return None
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def usable_memory(device: str, memory: int | None) -> int | None:
    """What a step may use of ``memory`` (see the module doc)."""
    if memory is None:
        return None
    reserve = _CUDA_CONTEXT if device == "cuda" else 0
    return max(0, int(memory * (1 - _FRAGMENTATION)) - reserve)


def forecast_memory(
    model: Any, optimizer: Any | None, loss_fn: Any, batch: Any, options: ForecastOptions
) -> Forecast:
    """Measure the peak memory of a training step at each batch size of ``options``.

    ``batch`` is the probe batch (:class:`~torchdoctor.preflight.batch.Batch`). Nothing
    the user holds is run or changed: only fake copies are. A step that cannot be run on
    fake tensors gives a forecast whose ``error`` says why.
    """
    from torchdoctor.preflight.process import ProcessState

    memory = options.device_memory or detected_memory(options.device)
    usable = usable_memory(options.device, memory)
    process = ProcessState()
    try:
        return _Run(model, optimizer, loss_fn, batch, options, usable).forecast(memory)
    except Exception as error:  # noqa: BLE001 - the user's code on fake tensors
        from torchdoctor.preflight.memory_step import NotMeasurable

        reason = (
            str(error) if isinstance(error, NotMeasurable) else f"{type(error).__name__}: {error}"
        )
        return Forecast(
            options,
            device_memory=memory,
            usable_bytes=usable,
            error="the training step cannot be measured on fake tensors: " + reason,
        )
    finally:
        process.restore()


class _Run:
    """One forecast: a fake copy, its tracker, and the measurements on it."""

    def __init__(
        self,
        model: Any,
        optimizer: Any | None,
        loss_fn: Any,
        batch: Any,
        options: ForecastOptions,
        usable: int | None,
    ) -> None:
        from torchdoctor.preflight.kernel_scratch import ColumnScratch, measure_scratch
        from torchdoctor.preflight.memory import LiveBytes, allocator_rounding
        from torchdoctor.preflight.memory_step import batch_size_of, fake_copy

        self.options, self.usable = options, usable
        self.sources = (model, optimizer, loss_fn, batch)
        self.copy = fake_copy(model, optimizer, loss_fn, batch)
        if options.device == "cuda" and self.copy.optimizer is not None:
            _prefer_foreach(self.copy.optimizer)
        self.rounding = allocator_rounding(options.device)
        self.scratch: Any = None
        if options.device == "cpu":
            measured = measure_scratch(
                model, optimizer, loss_fn, batch, lambda: self.autocast(options.amp)
            )
            self.scratch = measured if measured is not None else ColumnScratch()
        self.tracker = LiveBytes(self.rounding, self.scratch)
        self.probe_size = batch_size_of(batch) or 1
        self.measured: dict[int, Any] = {}
        self.process: int | None = None
        if options.device == "cpu":
            from torchdoctor.preflight.process_cost import process_cost

            self.process = process_cost(optimizer)

    def fits(self, peak: int) -> bool | None:
        return None if self.usable is None else peak <= self.usable

    def autocast(self, amp: str | None) -> Any:
        import torch

        if amp is None:
            return None
        dtype = torch.bfloat16 if amp == "bf16" else torch.float16
        return torch.autocast("cpu", dtype=dtype)

    def step(
        self,
        size: int,
        *,
        copy: Any = None,
        tracker: Any = None,
        keep_grads: bool = False,
        amp: str | None = "default",
    ) -> Any:
        from torchdoctor.preflight.memory_step import measure_step, resize_batch

        copy = copy or self.copy
        tracker = tracker or self.tracker
        batch = resize_batch(copy.batch, size, copy.mode)
        if self.scratch is not None:
            self.scratch.start(size)
        memory = measure_step(
            copy,
            tracker,
            batch,
            keep_grads=keep_grads,
            autocast=self.autocast(self.options.amp if amp == "default" else amp),
        )
        return memory if self.options.device != "cpu" else self.resident(memory, tracker)

    def resident(self, memory: Any, tracker: Any) -> Any:
        """On the CPU: the step's peak as the process's resident size sees it, the
        allocator's peak plus the freed heap glibc keeps and the process's one-time cost
        (both in the breakdown)."""
        from torchdoctor.preflight.heap_model import retained_bytes

        retained, process = retained_bytes(tracker.events), self.process or 0
        breakdown = {**memory.breakdown, "heap_retained": retained, "process": process}
        return dataclasses.replace(
            memory, peak=memory.peak + retained + process, breakdown=breakdown
        )

    def at(self, size: int) -> Any:
        if size not in self.measured:
            self.measured[size] = self.step(size)
        return self.measured[size]

    def forecast(self, memory: int | None) -> Forecast:
        sizes = self.options.batch_sizes or (self.probe_size,)
        self.step(min(sizes))  # creates the optimizer's state
        points = tuple(
            ForecastPoint(
                size, self.at(size).peak, self.fits(self.at(size).peak), self.at(size).breakdown
            )
            for size in sizes
        )
        largest = max(sizes)
        top = sorted(self.at(largest).module_activations.items(), key=lambda kv: -kv[1])[:5]
        root = type(self.copy.model).__name__
        top = [(name or root, size) for name, size in top]
        # Remedies first, beside their baseline: the search below runs far larger steps.
        base = self.at(largest).peak
        remedies: tuple[Remedy, ...] = ()
        if self.options.remedies:
            base = self.step(largest).peak
            remedies = tuple(
                r for r in self.remedies(largest, base) if r.saving_bytes > base * _MIN_SAVING
            )
        slope, largest_fit = self.largest_fitting(largest)
        bound = largest_fit is not None and largest_fit >= self.search_limit(largest)
        return Forecast(
            self.options,
            points,
            memory,
            self.usable,
            largest_fit,
            slope,
            tuple(top),
            remedies,
            largest_is_bound=bound,
            remedy_batch_size=largest if self.options.remedies else None,
            remedy_baseline_bytes=base if self.options.remedies else None,
            kernel_scratch=None if self.scratch is None else self.scratch.method,
            process_measured=None if self.options.device != "cpu" else self.process is not None,
        )

    @staticmethod
    def search_limit(largest: int) -> int:
        """The largest batch size the search for the largest fitting one measures."""
        return min(_MAX_BATCH, largest * _SEARCH_FACTOR)

    def largest_fitting(self, largest: int) -> tuple[float | None, int | None]:
        """The fitted growth per sample, and the largest batch size measured to fit (at
        most :meth:`search_limit`)."""
        if len(self.measured) < 2:
            self.at(largest * 2)
        first, second = sorted(self.measured)[-2:]
        slope = (self.at(second).peak - self.at(first).peak) / (second - first)
        if self.usable is None:
            return slope, None
        limit = self.search_limit(largest)
        fitting = [size for size, step in self.measured.items() if step.peak <= self.usable]
        failing = [size for size, step in self.measured.items() if step.peak > self.usable]
        low = max(fitting, default=0)
        high = min(failing, default=limit + 1)
        for attempt in range(8):
            if high - low <= 1:
                break
            guess = self.guess(low, high, slope, bisect=attempt >= 4, limit=limit)
            if self.at(guess).peak <= self.usable:
                low = guess
            else:
                high = guess
        return slope, (min(low, limit) or None)

    def guess(self, low: int, high: int, slope: float, *, bisect: bool, limit: int) -> int:
        """The next batch size to measure between ``low`` (fits, or 0) and ``high`` (does
        not fit): on the line through both when both are measured (the peak is linear
        in the batch size piece by piece), else along ``slope``; halfway when the line
        converges slowly."""
        assert self.usable is not None
        if bisect and high <= limit:
            return (low + high) // 2
        anchor = low or min(self.measured)
        if high <= limit and anchor != high:
            slope = (self.at(high).peak - self.at(anchor).peak) / (high - anchor)
        if slope > 0:
            predicted = anchor + int((self.usable - self.at(anchor).peak) / slope)
        else:
            predicted = high - 1
        return max(low + 1, min(high - 1, predicted, limit))

    def remedies(self, size: int, base: int) -> Iterator[Remedy]:
        """Each remedy at batch size ``size`` (accumulation: the same effective batch),
        with its saving against ``base``, the peak of ``size`` measured just before."""

        def remedy(name: str, peak: int) -> Remedy:
            return Remedy(name, size, peak, base - peak, self.fits(peak))

        if self.options.amp is None:
            yield remedy("autocast bf16", self.step(size, amp="bf16").peak)
        with _checkpointed(self.copy.model, self.at(size).module_activations) as blocks:
            if blocks:
                yield remedy(f"activation checkpointing of {blocks}", self.step(size).peak)
        sgd = self.sgd_peak(size)
        if sgd is not None:
            yield remedy(
                f"SGD with momentum instead of {type(self.copy.optimizer).__name__} (a bound)", sgd
            )
        for parts in (2, 4):
            if size % parts == 0 and size // parts >= 1:
                yield remedy(
                    f"gradient accumulation {parts} x {size // parts}",
                    self.step(size // parts, keep_grads=True).peak,
                )

    def sgd_peak(self, size: int) -> int | None:
        """The peak with SGD (momentum 0.9) in place of an optimizer with more state."""
        import torch

        from torchdoctor.preflight.memory import LiveBytes
        from torchdoctor.preflight.memory_step import StepCopy

        optimizer = self.copy.optimizer
        if optimizer is None or isinstance(optimizer, torch.optim.SGD):
            return None
        params = [p for group in optimizer.param_groups for p in group["params"]]
        with self.copy.context():
            sgd = torch.optim.SGD(
                params, lr=0.01, momentum=0.9, foreach=self.options.device == "cuda"
            )
        copy = StepCopy(self.copy.model, sgd, self.copy.loss_fn, self.copy.mode, self.copy.batch)
        tracker = LiveBytes(self.rounding, self.scratch)
        saved = dict(optimizer.state)
        optimizer.state.clear()  # the other optimizer's state is not alive with SGD
        try:
            self.step(size, copy=copy, tracker=tracker)
            return int(self.step(size, copy=copy, tracker=tracker).peak)
        finally:
            optimizer.state.update(saved)


def _prefer_foreach(optimizer: Any) -> None:
    """Use the ``foreach`` implementation where the user left the choice to torch, as
    torch does for CUDA tensors."""
    for group in optimizer.param_groups:
        if "foreach" in group and group["foreach"] is None and not group.get("fused"):
            group["foreach"] = True


@contextlib.contextmanager
def _checkpointed(model: Any, activations: dict[str, int]) -> Iterator[str | None]:
    """Wrap the forward of the model's repeated blocks (modules of the same class in a
    ``ModuleList`` or ``Sequential`` that have submodules) in activation checkpointing;
    yields a description of what was wrapped, or ``None``."""
    import torch
    from torch.utils.checkpoint import checkpoint

    blocks = []
    for path, module in model.named_modules():
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            children = [
                (f"{path}.{name}" if path else name, child)
                for name, child in module.named_children()
            ]
            kinds = [type(child) for _, child in children]
            blocks += [
                (name, child)
                for name, child in children
                if kinds.count(type(child)) > 1
                and any(child.children())
                and _saved(activations, name) > 0
            ]
    names = {name for name, _ in blocks}
    blocks = [
        (name, child)
        for name, child in blocks
        if not any(name.startswith(other + ".") for other in names)
    ]
    originals = []
    for _, child in blocks:
        originals.append((child, child.__dict__.get("forward")))
        child.forward = functools.partial(
            checkpoint,
            functools.partial(type(child).forward, child),
            use_reentrant=False,
            preserve_rng_state=False,
        )
    try:
        if not blocks:
            yield None
        else:
            first, last = blocks[0][0], blocks[-1][0]
            yield f"{len(blocks)} blocks ({first} .. {last})" if len(blocks) > 1 else first
    finally:
        for child, original in originals:
            if original is None:
                del child.forward
            else:
                child.forward = original


def _saved(activations: dict[str, int], path: str) -> int:
    return sum(
        size for name, size in activations.items() if name == path or name.startswith(path + ".")
    )
