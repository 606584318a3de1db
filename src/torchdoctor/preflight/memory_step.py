"""One training step, measured by :class:`~torchdoctor.preflight.memory.LiveBytes`.

:func:`fake_copy` makes copies of the model, its optimizer and its loss whose every tensor
is a fake tensor (``FakeTensorMode``): shapes, dtypes and strides without data, so a
step of a model too large for this machine, or built on the ``meta`` device, costs no
memory and little time. :func:`real_copy` makes plain copies (the same step on real
tensors, to check the forecast against). :func:`measure_step` runs forward, loss,
backward and the optimizer's step on a copy, at a given batch size, and returns the peak
and its breakdown.

Batches of other sizes are built from the probe batch along dimension 0: every tensor of
the batch whose first dimension equals the batch size (the first dimension of the
batch's first tensor) is repeated or cut to the new size; other tensors are left alone.
On fake tensors this is free; their values are never read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torchdoctor.preflight.batch import Batch, iter_tensors
from torchdoctor.preflight.memory import PHASE, LiveBytes
from torchdoctor.preflight.training import deep_copy, reduce_loss

__all__ = [
    "NotMeasurable",
    "StepCopy",
    "StepMemory",
    "batch_size_of",
    "fake_copy",
    "measure_forward",
    "measure_step",
    "real_copy",
    "resize_batch",
]


class NotMeasurable(Exception):  # noqa: N818 - a reason, reported as a fact
    """The step cannot be measured on fake tensors (an op whose output depends on values,
    such as ``nonzero``, boolean-mask indexing or ``.item()``)."""


@dataclass(slots=True)
class StepCopy:
    """A model, optimizer (or ``None``) and loss to measure, and the fake mode they live in
    (``None`` for real tensors)."""

    model: Any
    optimizer: Any | None
    loss_fn: Any
    mode: Any | None
    batch: Batch

    def context(self) -> Any:
        """The fake mode to enter around work on this copy (a no-op for real tensors)."""
        return self.mode if self.mode is not None else contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class StepMemory:
    """What one measured step used.

    Attributes:
        peak: the highest live bytes during the step.
        breakdown: live bytes per category at that moment.
        module_activations: bytes saved for backward at the end of the forward, per module
            path (the innermost module running when each tensor was saved).
    """

    peak: int
    breakdown: dict[str, int]
    module_activations: dict[str, int]


def batch_size_of(batch: Batch) -> int | None:
    """The first dimension of the batch's first tensor of one dimension or more."""
    for _, tensor in (
        *iter_tensors(batch.inputs, "inputs"),
        *iter_tensors(batch.targets, "targets"),
    ):
        if tensor.dim() >= 1:
            return int(tensor.shape[0])
    return None


def resize_batch(batch: Batch, size: int, mode: Any | None) -> Batch:
    """``batch`` with its batched tensors (see the module doc) at batch size ``size``."""
    import torch

    old = batch_size_of(batch)

    def resize(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.dim() == 0 or old is None or value.shape[0] != old:
                return value
            if mode is not None:
                with mode:
                    return torch.empty(
                        (size, *value.shape[1:]), dtype=value.dtype, device=value.device
                    )
            return value[torch.arange(size, device=value.device) % old]
        if isinstance(value, dict):
            return {key: resize(item) for key, item in value.items()}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*(resize(item) for item in value))
        if isinstance(value, (tuple, list)):
            return type(value)(resize(item) for item in value)
        return value

    return batch.mapped(resize)


def _fake_like(mode: Any, tensor: Any) -> Any:
    import torch

    with mode:
        return torch.empty_strided(
            tuple(tensor.shape), tuple(tensor.stride()), dtype=tensor.dtype, device="cpu"
        )


def _fake_scalar(mode: Any, tensor: Any) -> Any:
    """A fake tensor that knows its value: an optimizer reads its step counter."""
    import torch

    value = 0 if tensor.device.type == "meta" else tensor.detach().cpu().reshape(()).item()
    with mode:
        return torch.tensor(value, dtype=tensor.dtype).reshape(tensor.shape)


def _fake_batch(mode: Any, batch: Batch) -> Batch:
    import torch

    def fake(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return _fake_like(mode, value.contiguous() if value.device.type != "meta" else value)
        if isinstance(value, dict):
            return {key: fake(item) for key, item in value.items()}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*(fake(item) for item in value))
        if isinstance(value, (tuple, list)):
            return type(value)(fake(item) for item in value)
        return value

    return batch.mapped(fake)


def _loss_owner(loss_fn: Any) -> Any | None:
    import torch

    if isinstance(loss_fn, torch.nn.Module):
        return loss_fn
    owner = getattr(loss_fn, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def fake_copy(model: Any, optimizer: Any | None, loss_fn: Any, batch: Batch) -> StepCopy:
    """Copies of the objects with every parameter, buffer, optimizer tensor and batch
    tensor replaced by a fake tensor on the CPU (whatever device the original is on).

    Raises:
        CopyUnavailable: the objects cannot be deep-copied.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    owner = _loss_owner(loss_fn)
    modules = [*model.modules(), *(owner.modules() if owner is not None else ())]
    memo: dict[int, Any] = {}
    for module in modules:
        for param in module.parameters(recurse=False):
            memo.setdefault(
                id(param),
                torch.nn.Parameter(_fake_like(mode, param), requires_grad=param.requires_grad),
            )
        for buffer in module.buffers(recurse=False):
            memo.setdefault(id(buffer), _fake_like(mode, buffer))
    for entries in optimizer.state.values() if optimizer is not None else ():
        for value in entries.values():
            if isinstance(value, torch.Tensor) and id(value) not in memo:
                memo[id(value)] = (
                    _fake_scalar(mode, value) if value.numel() <= 1 else _fake_like(mode, value)
                )
    copied = deep_copy(
        (model, loss_fn if owner is not None else None, optimizer),
        modules,
        memo=memo,
        computed=lambda tensor: _fake_like(mode, tensor),
    )
    model_copy, loss_copy, optimizer_copy = copied
    return StepCopy(
        model_copy,
        optimizer_copy,
        loss_copy if owner is not None else loss_fn,
        mode,
        _fake_batch(mode, batch),
    )


def real_copy(model: Any, optimizer: Any | None, loss_fn: Any, batch: Batch) -> StepCopy:
    """Plain deep copies of the objects (real tensors), to measure a real step."""
    owner = _loss_owner(loss_fn)
    modules = [*model.modules(), *(owner.modules() if owner is not None else ())]
    model_copy, loss_copy, optimizer_copy = deep_copy(
        (model, loss_fn if owner is not None else None, optimizer), modules
    )
    return StepCopy(
        model_copy, optimizer_copy, loss_copy if owner is not None else loss_fn, None, batch
    )


def _clear_grads(copy: StepCopy, keep: bool) -> None:
    for param in copy.model.parameters():
        if param.grad is not None:
            if keep:
                param.grad.zero_()
            else:
                param.grad = None


@contextlib.contextmanager
def _grad_hooks(copy: StepCopy, tracker: LiveBytes) -> Iterator[None]:
    handles = [
        param.register_post_accumulate_grad_hook(lambda p: tracker.track(p.grad, "gradients"))
        for param in copy.model.parameters()
        if param.requires_grad
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _track_existing(copy: StepCopy, batch: Batch, tracker: LiveBytes) -> None:
    tensors = [*copy.model.parameters(), *copy.model.buffers()]
    owner = _loss_owner(copy.loss_fn)
    if owner is not None:
        tensors += [*owner.parameters(), *owner.buffers()]
    for tensor in tensors:
        tracker.track(tensor, "parameters")
        if getattr(tensor, "grad", None) is not None:
            tracker.track(tensor.grad, "gradients")
    for _, tensor in (
        *iter_tensors(batch.inputs, "inputs"),
        *iter_tensors(batch.targets, "targets"),
    ):
        tracker.track(tensor, "batch")
    _track_state(copy, tracker)


def _track_state(copy: StepCopy, tracker: LiveBytes) -> None:
    import torch

    for entries in copy.optimizer.state.values() if copy.optimizer is not None else ():
        for value in entries.values():
            if isinstance(value, torch.Tensor):
                tracker.track(value, "optimizer_state")


def measure_step(
    copy: StepCopy,
    tracker: LiveBytes,
    batch: Batch,
    *,
    keep_grads: bool = False,
    autocast: Any | None = None,
) -> StepMemory:
    """Measure one step (forward, loss, backward, optimizer step) of ``copy`` on ``batch``.

    Gradients of the previous step are freed first (``zero_grad(set_to_none=True)``), or
    kept and zeroed in place with ``keep_grads``. The step's output and loss are freed at
    its end, as a loop that computes them in a function does.

    Raises:
        NotMeasurable: an op's output depends on values a fake tensor does not have.
        UserCodeError: the user's forward or loss raised.
    """
    import torch

    _clear_grads(copy, keep_grads)
    with copy.context(), torch.enable_grad():
        _track_existing(copy, batch, tracker)
        tracker.reset_peak()
        copy.model.train()
        with _grad_hooks(copy, tracker), _translate_fake_errors(), tracker.active(copy.model):
            with autocast if autocast is not None else contextlib.nullcontext():
                loss = reduce_loss(batch.loss(copy.loss_fn, batch.call(copy.model)))
            activations = tracker.module_activations()
            if loss.requires_grad:
                loss.backward()
            del loss
            if copy.optimizer is not None:
                tracker.events.append(PHASE)  # parameter-shaped blocks from here on
                copy.optimizer.step()
        _track_state(copy, tracker)
    return StepMemory(tracker.peak, dict(tracker.peak_breakdown), activations)


def measure_forward(
    copy: StepCopy, tracker: LiveBytes, batch: Batch
) -> tuple[dict[str, Any], dict[str, int]]:
    """One training-mode forward with gradients; returns each module's first output
    shape (``None`` for modules that returned no tensor) and the bytes saved for backward
    per module at the end of the forward.

    Raises:
        NotMeasurable: an op's output depends on values a fake tensor does not have.
    """
    import torch

    shapes: dict[str, Any] = {}
    handles = []
    for path, module in copy.model.named_modules():

        def record(_: Any, __: Any, output: Any, path: str = path) -> None:
            if path not in shapes:
                shapes[path] = _first_shape(output)

        handles.append(module.register_forward_hook(record))
    try:
        with copy.context():
            _track_existing(copy, batch, tracker)
            copy.model.train()
            with _translate_fake_errors(), torch.enable_grad(), tracker.active(copy.model):
                output = batch.call(copy.model)
            activations = tracker.module_activations()
            del output
    finally:
        for handle in handles:
            handle.remove()
    return shapes, activations


def _first_shape(output: Any) -> list[int] | None:
    for _, tensor in iter_tensors(output, "output"):
        return [int(size) for size in tensor.shape]
    return None


@contextlib.contextmanager
def _translate_fake_errors() -> Iterator[None]:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    try:
        yield
    except (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    ) as error:
        raise NotMeasurable(f"{type(error).__name__}: {error}") from error
