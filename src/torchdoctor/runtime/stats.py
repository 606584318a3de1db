"""Batched on-device statistics of a sampled optimizer step.

One sampled step costs a handful of ``torch._foreach_*`` kernels whatever the number of
parameters: the norm of every gradient before the step, the norm of every parameter after
it, and the size of the update on a small fixed *probe* slice of each parameter (a view of
at most :data:`PROBE_ELEMENTS` elements, copied into a buffer kept between samples, so no
copy of the model is ever made). The results are concatenated into one vector and read
back to the host later through :class:`~torchdoctor.runtime.readback.Readback`.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from torchdoctor.runtime.detectors.base import OptimizerInfo, StepSample

__all__ = ["PROBE_ELEMENTS", "ProbeSet", "StepStats", "exact_norms", "norms"]

PROBE_ELEMENTS = 4096


class ProbeSet:
    """Per-parameter probe views and their persistent "before" buffers, for one optimizer."""

    def __init__(self, torch: ModuleType, params: tuple[torch.Tensor, ...]) -> None:
        self._torch = torch
        self.views: list[Any] = []
        self.buffers: list[Any] = []
        self.owners: list[int] = []  # parameter index of each probe
        self.floors: list[float] = []  # the smallest size an update is compared with
        self._storage: list[int] = []
        for index, param in enumerate(params):
            if param.is_sparse or param.numel() == 0 or not param.is_floating_point():
                continue
            view = _probe_view(param)
            self.views.append(view)
            self.floors.append(default_init_norm(param, view))
            self.buffers.append(torch.empty_like(view))
            self.owners.append(index)
            self._storage.append(_storage_pointer(param))

    def stale(self, params: tuple[torch.Tensor, ...]) -> bool:
        """Whether a parameter's storage was swapped (``p.data = ...``) since the views."""
        return any(
            _storage_pointer(params[i]) != ptr
            for i, ptr in zip(self.owners, self._storage, strict=True)
        )


def default_init_norm(param: torch.Tensor, view: torch.Tensor) -> float:
    """The norm ``view`` would have if ``param`` held torch's default initialisation
    (uniform with bound ``1/sqrt(fan_in)``); 0 for tensors of fewer than 2 dimensions.

    An update is compared with the larger of this and the weights' own norm: a layer
    initialised to zero on purpose (the last layer of a residual branch or of a spatial
    transformer's localisation net) has weights as small as its first updates, and a step
    "as large as the weights" means nothing until they have a size of their own.
    """
    if param.dim() < 2 or param.shape[0] == 0:
        return 0.0
    fan_in = param.numel() // param.shape[0]
    return math.sqrt(view.numel() / (3.0 * max(1, fan_in)))


def _probe_view(param: torch.Tensor) -> torch.Tensor:
    view = param.detach()
    if view.dim() == 0 or view.numel() <= PROBE_ELEMENTS:
        return view
    row = max(1, view.numel() // view.shape[0])
    rows = max(1, PROBE_ELEMENTS // row)
    return view.narrow(0, 0, min(rows, view.shape[0]))


def _storage_pointer(param: torch.Tensor) -> int:
    try:
        return int(param.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
        return 0


class StepStats:
    """Statistics of one sampled step of one optimizer, computed in two halves.

    Call :meth:`before` in the step pre-hook and :meth:`after` in the post-hook; then
    :meth:`vector` is the one tensor to read back and :meth:`decode` turns the host list
    into a :class:`StepSample`.
    """

    def __init__(
        self,
        torch: ModuleType,
        info: OptimizerInfo,
        probes: ProbeSet | None,
        step: int,
        global_step: int,
    ) -> None:
        self._torch = torch
        self.info = info
        self.probes = probes
        self.step = step
        self.global_step = global_step
        self._grad_index: list[int] = []
        self._parts: list[Any] = []
        self._lrs: tuple[float, ...] = ()
        self._group_of: tuple[int, ...] = ()

    def before(self) -> None:
        """Gradient norms, learning rates, and the probe copy (before ``step()``)."""
        torch = self._torch
        params = self.info.params
        grads = []
        for index, param in enumerate(params):
            grad = param.grad
            if grad is not None and not grad.is_sparse and grad.numel():
                grads.append(grad)
                self._grad_index.append(index)
        groups = self.info.optimizer.param_groups
        self._lrs = tuple(_as_float(group.get("lr", math.nan)) for group in groups)
        self._group_of = tuple(g for g, group in enumerate(groups) for _ in group["params"])
        with torch.no_grad():
            self._parts.append(norms(torch, grads))
            if self.probes is not None and self.probes.views:
                _copy_all(torch, self.probes.buffers, self.probes.views)

    def after(self) -> None:
        """Parameter norms and probe update norms (after ``step()``)."""
        torch = self._torch
        with torch.no_grad():
            tensors = list(self.info.params)
            if self.probes is not None and self.probes.views:
                # One batch of norms, in the order decode() reads them: parameters, then
                # the probes' updates, then the probes' values before the step.
                tensors += torch._foreach_sub(self.probes.views, self.probes.buffers)
                tensors += self.probes.buffers
            self._parts.append(norms(torch, tensors))

    def vector(self) -> Any:
        """Everything measured, as one float32 vector on one device."""
        torch = self._torch
        parts = [p for p in self._parts if p is not None]
        if not parts:
            return torch.zeros(0)
        device = parts[0].device
        return torch.cat([p.to(device) for p in parts])

    def decode(self, values: list[float]) -> StepSample:
        """Turn the read-back vector into a :class:`StepSample`."""
        # Imported here: the detectors package imports this module (no import cycle).
        from torchdoctor.runtime.detectors.base import StepSample

        count = len(self.info.params)
        cursor = 0
        grad_norms: list[float | None] = [None] * count
        for index in self._grad_index:
            grad_norms[index] = values[cursor]
            cursor += 1
        param_norms = tuple(values[cursor : cursor + count])
        cursor += count
        ratios: tuple[float | None, ...] | None = None
        if self.probes is not None and self.probes.views:
            probes = len(self.probes.views)
            deltas, weights = values[cursor : cursor + probes], values[cursor + probes :]
            by_param: list[float | None] = [None] * count
            for owner, delta, weight, floor in zip(
                self.probes.owners, deltas, weights, self.probes.floors, strict=True
            ):
                size = max(weight, floor)
                by_param[owner] = delta / size if size > 0 else None
            ratios = tuple(by_param)
        return StepSample(
            optimizer=self.info,
            step=self.step,
            global_step=self.global_step,
            grad_norms=tuple(grad_norms),
            param_norms=param_norms,
            update_ratios=ratios,
            lrs=self._lrs,
            group_of=self._group_of,
        )


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):  # a tensor learning rate on another device, ...
        return math.nan


def norms(torch: ModuleType, tensors: list[Any]) -> Any:
    """One float32 vector of L2 norms, on the first tensor's device (``None`` if empty).

    Call it under ``torch.no_grad()``; sparse tensors are not supported.
    """
    if not tensors:
        return None
    tensors = _local(tensors)
    device = tensors[0].device
    if all(t.device == device for t in tensors):
        return torch.stack(_foreach_norm(torch, tensors)).to(device)
    # Model parallel: norms per device, gathered on the first one, order kept.
    return torch.stack([_foreach_norm(torch, [t])[0].to(device) for t in tensors])


_CHUNK = 1 << 22  # elements upcast at a time: 32 MiB of float64, whatever the tensor


def exact_norms(torch: ModuleType, tensors: list[Any]) -> Any:
    """Per tensor, its L2 norm in float64, on the first tensor's device (call it under
    ``torch.no_grad()``, with at least one dense tensor).

    float32 is not enough to tell "never changed": BatchNorm weights of 1.0 nudged by 1e-4
    up and down move a float32 norm by less than its last bit, and the parameter read as
    frozen (a false TD218 on a real U-Net). Large tensors are upcast a slice at a time, so
    the check never holds a float64 copy of a whole embedding.
    """
    tensors = _local(tensors)
    device = tensors[0].device
    wide = torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64
    values = []
    for tensor in tensors:
        flat = tensor.reshape(-1)
        squares = [
            flat[start : start + _CHUNK].to(wide).square().sum()
            for start in range(0, max(1, flat.numel()), _CHUNK)
        ]
        values.append(torch.stack(squares).sum().sqrt().to(device))
    return torch.stack(values)


def _local(tensors: list[Any]) -> list[Any]:
    """This rank's shards of DTensors (FSDP2's ``fully_shard``, tensor parallel), whose
    sharded operators lack the foreach kernels used here; other tensors as they are. The
    statistics of a sharded parameter are then those of this rank's shard."""
    if not any(hasattr(kind, "to_local") for kind in {type(t) for t in tensors}):
        return tensors  # asked of the few types, not of every tensor: this runs per sample
    return [t.to_local() if hasattr(t, "to_local") else t for t in tensors]


def _copy_all(torch: ModuleType, targets: list[Any], sources: list[Any]) -> None:
    targets, sources = _local(targets), _local(sources)
    copy = getattr(torch, "_foreach_copy_", None)
    if copy is not None:
        copy(targets, sources)
        return
    for target, source in zip(targets, sources, strict=True):  # torch without foreach copy
        target.copy_(source)


_FOREACH_DTYPE: list[bool] = []


def _foreach_norm(torch: ModuleType, tensors: list[Any]) -> list[Any]:
    """float32 norms of tensors of any dtype, in order.

    float32, float16 and bfloat16 accumulate in float32 (half-precision norms cannot
    overflow); float64 and complex tensors take their own norm, then float32 (a float32
    accumulation would narrow them, which torch refuses); integer and bool tensors (buffers,
    frozen parameters) are converted to float32 first.
    """
    narrow = (torch.float32, torch.float16, torch.bfloat16)
    if all(t.dtype in narrow for t in tensors):
        return _foreach_norm_narrow(torch, tensors)
    result: list[Any] = [None] * len(tensors)
    low = [i for i, t in enumerate(tensors) if t.dtype in narrow]
    for index, value in zip(
        low, _foreach_norm_narrow(torch, [tensors[i] for i in low]), strict=True
    ):
        result[index] = value
    wide = [
        i
        for i, t in enumerate(tensors)
        if t.dtype not in narrow and (t.is_floating_point() or t.is_complex())
    ]
    if wide:
        values = torch._foreach_norm([tensors[i] for i in wide], 2)
        for index, value in zip(wide, values, strict=True):
            result[index] = value.float()
    for index, tensor in enumerate(tensors):
        if result[index] is None:  # integer or bool
            result[index] = torch.linalg.vector_norm(tensor.float())
    return result


def _foreach_norm_narrow(torch: ModuleType, tensors: list[Any]) -> list[Any]:
    if not tensors:
        return []
    if not _FOREACH_DTYPE:
        try:
            torch._foreach_norm([torch.zeros(1)], 2, dtype=torch.float32)
            _FOREACH_DTYPE.append(True)
        except TypeError:  # torch without the dtype argument
            _FOREACH_DTYPE.append(False)
    if _FOREACH_DTYPE[0]:
        return list(torch._foreach_norm(tensors, 2, dtype=torch.float32))
    return [n.float() for n in torch._foreach_norm([t.float() for t in tensors], 2)]
