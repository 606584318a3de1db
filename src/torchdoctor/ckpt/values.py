"""Scans over tensor values in bounded memory: non-finite counts and differences.

Checkpoint tensors may be memory-mapped views of a file many times larger than the memory
at hand. Every scan here walks a tensor in fixed-size chunks, so the temporaries it
allocates stay small whatever the tensor's size.

Only stored values are scanned: a view whose virtual size exceeds its storage (a stride-0
``expand``, overlapping strides) is scanned through the storage it reads, never element by
element of the view (a 1.5 KB file can hold a view of 2**40 elements).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHUNK_ELEMENTS", "count_non_finite", "max_abs_difference"]

CHUNK_ELEMENTS = 1 << 22  # 4 Mi elements: 32 MiB of float64 temporaries at most


def _flat(tensor: Any) -> Any:
    # A contiguous tensor flattens for free. A view that covers its storage once
    # (a permutation, a slice) is copied, as large as the tensor at most; any other view
    # is read through its storage: the values it holds, never more than the file does.
    if tensor.is_contiguous():
        return tensor.reshape(-1)
    stored = _stored(tensor)
    if stored is not None and stored.numel() < tensor.numel():
        return stored
    return tensor.reshape(-1)


def _stored(tensor: Any) -> Any:
    """The tensor's storage as a flat tensor of its dtype (``None`` when unavailable)."""
    try:
        storage = tensor.untyped_storage()
        count = storage.nbytes() // tensor.element_size()
        return tensor.new_empty(0).set_(storage, 0, (count,), (1,))
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return None


def count_non_finite(tensor: Any) -> tuple[int, int]:
    """``(NaN count, Inf count)`` of a floating or complex tensor; ``(0, 0)`` otherwise."""
    if not (tensor.is_floating_point() or tensor.is_complex()) or tensor.numel() == 0:
        return 0, 0
    import torch

    flat = _flat(tensor.detach())
    nan = inf = 0
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):
        chunk = flat[start : start + CHUNK_ELEMENTS]
        if bool(torch.isfinite(chunk).all()):
            continue
        nan += int(torch.isnan(chunk).sum())
        inf += int(torch.isinf(chunk).sum())
    return nan, inf


def max_abs_difference(first: Any, second: Any) -> float:
    """Largest ``|first - second|`` over two tensors of one shape, computed in float64.

    Positions where both hold the same value (equal infinities, or NaN in both) count as
    no difference; NaN in only one of them makes the result NaN.
    """
    import torch

    if first.numel() == 0:
        return 0.0
    if first.dtype == torch.bool or second.dtype == torch.bool:
        return float(bool((first != second).any()))
    a, b = _flat(first.detach()), _flat(second.detach())
    if a.numel() != b.numel():  # views read through storages of different layouts
        same_layout = (
            first.stride() == second.stride() and first.storage_offset() == second.storage_offset()
        )
        if not same_layout:
            return float("nan")  # cannot be compared value by value within the budget
        a, b = a[: min(a.numel(), b.numel())], b[: min(a.numel(), b.numel())]
    wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
    worst = 0.0
    for start in range(0, a.numel(), CHUNK_ELEMENTS):
        x = a[start : start + CHUNK_ELEMENTS].to(wide)
        y = b[start : start + CHUNK_ELEMENTS].to(wide)
        same = (x == y) | (torch.isnan(x) & torch.isnan(y))
        difference = torch.where(same, torch.zeros((), dtype=torch.float64), (x - y).abs())
        if bool(torch.isnan(difference).any()):
            return float("nan")
        worst = max(worst, float(difference.max()))
    return worst
