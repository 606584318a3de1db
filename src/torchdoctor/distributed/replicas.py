"""Which tensors outside a DDP module must stay identical across ranks (TD810).

DDP keeps the parameters *inside* its module equal: it broadcasts them at wrapping and
all-reduces their gradients. An optimizer often steps more: a loss's own parameters (a
learned temperature, an ArcFace margin's class centres), a head kept beside the wrapped
model, or, in a tensor-parallel job without DDP, every replicated tensor (LayerNorms,
biases of row-parallel layers). The invariant: a tensor that every rank holds identical
and that every rank steps from the same gradients stays identical after the step.

At the first cross-rank check (step 1, before any step), every rank sends per-tensor sums
of the stepping optimizer's tensors that are outside the DDP modules, of their gradients,
and the step's loss: two short exchanges, once per run. A tensor is then watched with the
DDP parameters at every later check when it was identical on every rank and either

* the optimizer also steps a DDP model (the job is data parallel: everything it steps is
  one model), or
* its gradient was identical on every rank (someone reduced it, or the data is the same), or
* the ranks' losses were identical (they compute one thing: tensor parallelism) and the
  code marks its shards, so that the tensors it leaves unmarked are its replicas;

and it does not say it is a shard: tensors that Megatron-style code marks
(``tensor_model_parallel``, ``partition_dim``), DeepSpeed experts (``allreduce=False``),
and DTensors (whose placements the user chose) are never watched. Policy for correct
programs that look alike: ranks that train independent models (an ensemble, a sweep)
compute different losses on different data and reduce no gradient, so nothing is watched;
in tensor-parallel code that marks no shard, a shard initialised alike on every rank
(zeros) is watched only when its gradients agree at the first step, which a shard's do not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torchdoctor.distributed.exchange import Exchange
from torchdoctor.runtime.detectors.base import OptimizerInfo

__all__ = ["is_shard", "replicated_outside", "tensor_sums"]

# Attributes by which tensor-parallel frameworks mark a tensor as one rank's part.
_SHARD_MARKS = ("tensor_model_parallel", "partition_dim", "model_parallel", "expert")


def is_shard(tensor: Any) -> bool:
    """Whether ``tensor`` says it is one rank's part of a larger tensor (or is a DTensor,
    whose placements decide, and whose sum would itself be a collective)."""
    if type(tensor).__name__ == "DTensor" or hasattr(tensor, "placements"):
        return True
    if getattr(tensor, "allreduce", True) is False:
        return True
    return any(getattr(tensor, mark, None) not in (None, False) for mark in _SHARD_MARKS)


def replicated_outside(
    exchange: Exchange,
    optimizer: OptimizerInfo,
    inside: set[int],
    loss: float | None,
    torch: Any,
) -> list[tuple[str, Any]]:
    """The (name, tensor) pairs of ``optimizer`` outside the DDP modules (``inside``: ids
    of their parameters) that must stay identical across ranks. Every rank calls it at the
    same step; it exchanges twice, or once when the ranks disagree on how many there are."""
    candidates = [
        (name, param)
        for param, name in zip(optimizer.params, optimizer.names, strict=True)
        if id(param) not in inside
        and param.requires_grad
        and param.is_floating_point()
        and not param.is_sparse
        and param.numel() > 0
        and not is_shard(param)
    ]
    counts = exchange.extremes([float(len(candidates))])
    if counts is None or not counts.agree(0) or not candidates:
        return []
    count = len(candidates)
    unknown = 1e200 * (exchange.rank + 1)  # differs on every rank: never "agrees"
    values = tensor_sums([p for _, p in candidates], torch)
    grads = [unknown if g is None else g for g in _grad_sums(candidates, torch)]
    steps_ddp = 1.0 if any(id(p) in inside for p in optimizer.params) else 0.0
    marks_shards = 1.0 if any(is_shard(p) for p in optimizer.params) else 0.0
    loss_value = loss if loss is not None and math.isfinite(loss) else unknown
    seen = exchange.extremes([*values, *grads, loss_value, steps_ddp, marks_shards])
    if seen is None:
        return []
    tensor_parallel = seen.agree(2 * count) and seen.low[2 * count + 2] == 1.0
    one_job = tensor_parallel or seen.low[2 * count + 1] == 1.0
    return [
        candidates[i] for i in range(count) if seen.agree(i) and (one_job or seen.agree(count + i))
    ]


def tensor_sums(tensors: Sequence[Any], torch: Any) -> list[float]:
    """Per-tensor float64 sums, read back in one transfer."""
    if not tensors:
        return []
    with torch.no_grad():
        device = tensors[0].device
        stacked = torch.stack([t.detach().sum(dtype=torch.float64).to(device) for t in tensors])
        return [float(v) for v in stacked.cpu().tolist()]


def _grad_sums(candidates: Sequence[tuple[str, Any]], torch: Any) -> list[float | None]:
    """Per tensor, the sum of its dense gradient; ``None`` without one."""
    grads = [p.grad if p.grad is not None and not p.grad.is_sparse else None for _, p in candidates]
    present = [g for g in grads if g is not None]
    sums = iter(tensor_sums(present, torch))
    return [next(sums) if g is not None else None for g in grads]
