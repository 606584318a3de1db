"""What the cross-rank detectors learn by wrapping a few torch entry points.

* ``torch.distributed.init_process_group``: right after it returns, every rank builds
  torchdoctor's own gloo group (:mod:`torchdoctor.distributed.exchange`);
  ``destroy_process_group``: just before it, the check under way is finished;
* ``DistributedDataParallel.__init__``: which modules are DDP models, and the user's line
  that wrapped them, even when the training forward bypasses the wrapper;
* the DataLoader iterators' ``_next_data``: a fingerprint of the first batch of every
  epoch, and the sampler's epoch when the epoch starts.

Each wrapper calls the original first and then a callback that can never raise into the
user's code; :meth:`Patches.remove` restores every original that is still ours.
"""

from __future__ import annotations

import importlib
from typing import Any

from torchdoctor.runtime.patches import Patches, after_call, before_call

__all__ = [
    "Patches",
    "after_call",
    "batch_fingerprint",
    "before_call",
    "loader_iterator_classes",
]


def loader_iterator_classes() -> list[Any]:
    """The DataLoader iterator classes whose ``_next_data`` returns each batch."""
    module = importlib.import_module("torch.utils.data.dataloader")
    names = ("_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter")
    return [
        cls
        for cls in (getattr(module, n, None) for n in names)
        if cls is not None and "_next_data" in vars(cls)
    ]


def batch_fingerprint(batch: Any, torch: Any) -> float | None:
    """A number two ranks share only when (almost surely) their batches are equal: the
    float64 sums of the batch's first two tensors, weighted. ``None`` without tensors."""
    tensors = _leaves(batch, torch, limit=2)
    if not tensors:
        return None
    total = 0.0
    with torch.no_grad():
        for weight, tensor in enumerate(tensors, start=1):
            if tensor.is_floating_point() or tensor.dtype in (torch.int64, torch.int32):
                total += weight * float(tensor.detach().sum(dtype=torch.float64))
            total += weight * 1e-3 * tensor.numel()
    return total


def _leaves(value: Any, torch: Any, limit: int) -> list[Any]:
    found: list[Any] = []
    stack = [value]
    while stack and len(found) < limit:
        item = stack.pop(0)
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found
