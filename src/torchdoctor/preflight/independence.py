"""Batch independence: the batches that test it and how one example's values are compared.

In eval mode a model treats each example of a batch on its own: example ``k``'s output is
the same whatever the other examples are and however much padding they bring. Two
variants of the batch test it, each keeping example ``k`` (the last one) as it is:

* **others replaced**: every other example becomes a copy of example ``k`` (inputs,
  targets and every tensor laid out by example). The batch keeps its size, so the kernels
  keep their shapes and a model that keeps the invariant gives example ``k`` bit for bit
  the same output (measured: 0.0 on Linear, Conv2d and a Transformer encoder on the CPU;
  a batch of another size differs by up to 6e-7 relative, from BLAS blocking);
* **padding added**: when the batch is right-padded token sequences (a ``*mask*`` tensor,
  or token ids padded with an ``nn.Embedding``'s ``padding_idx``), every sequence tensor
  gets more padded positions, as when a longer example joins the batch. Example ``k``'s
  values at its own positions must not change (0.0 with ``src_key_padding_mask``, 0.11
  relative without it, on a 2-layer encoder).

Tensors are compared per example: along dimension 0 when it has one entry per example,
along dimension 1 for sequence-first tensors, whole otherwise; only positions both runs
have are compared (padding a variant added, positions a model trims to the batch's
longest sequence).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchdoctor.preflight.batch import TARGET_KEYS, Batch, iter_tensors

__all__ = [
    "Variant",
    "difference",
    "example_part",
    "examples_count",
    "map_tensors",
    "padding_added",
    "relates_examples",
    "others_replaced",
    "tolerance",
]


@dataclass(frozen=True, slots=True)
class Variant:
    """A batch that keeps example ``keep`` and changes what surrounds it."""

    batch: Batch
    grown: int  # positions appended along the sequence dimension (0: same shapes)
    change: str  # what changed, in words, for messages

    @property
    def padded(self) -> bool:
        """Whether this variant added padding (rather than replacing examples)."""
        return self.grown > 0


def map_tensors(value: Any, function: Callable[[Any], Any]) -> Any:
    """``value`` with ``function`` applied to every tensor inside (dicts, tuples, lists)."""
    import torch

    if isinstance(value, torch.Tensor):
        return function(value)
    if isinstance(value, dict):
        return {key: map_tensors(item, function) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(map_tensors(item, function) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(map_tensors(item, function) for item in value)
    return value


def examples_count(batch: Batch, batch_size: int | None = None) -> int | None:
    """Examples in the batch, or ``None`` when its layout is not certain.

    Split batches: dimension 0 of the targets. A step's batch (any structure): dimension 0
    of its first tensor, confirmed by the loader's ``batch_size``, a dict's labels or the
    targets the step's loss received; a sequence-first batch (``(seq, batch)`` ids, whose
    flattened targets confirm nothing) is left alone. Either way, a tensor whose first
    two dimensions are both that long could be laid out either way: not judged.
    """
    if batch.runner is None:
        count = _first_dim(batch.targets)
        count = count if count is not None else _first_dim(batch.inputs)
    else:
        count = _first_dim(batch.inputs)
        confirmations = [batch_size, _first_dim(batch.targets)]
        if isinstance(batch.inputs, dict):
            confirmations += [_first_dim(batch.inputs.get(key)) for key in TARGET_KEYS]
        if count not in confirmations:
            return None
    if count is None or _ambiguous(batch, count):
        return None
    return count


def _first_dim(value: Any) -> int | None:
    for _, tensor in iter_tensors(value, "batch"):
        if tensor.dim() >= 1:
            return int(tensor.shape[0])
    return None


def _ambiguous(batch: Batch, count: int) -> bool:
    """Whether a sequence tensor has as many steps as examples (``(seq, batch, ...)`` and
    ``(batch, seq, ...)`` alike); a 2-D float tensor is a feature matrix, never ambiguous."""
    for _, tensor in iter_tensors(batch.inputs, "inputs"):
        square = tensor.dim() >= 2 and tensor.shape[0] == tensor.shape[1] == count
        if square and not (tensor.dim() == 2 and tensor.is_floating_point()):
            return True
    return False


def relates_examples(batch: Batch, count: int) -> bool:
    """Whether the batch itself links its examples, as a graph's does: beside the
    examples' own tensor, a square adjacency over them or integer edges that index them
    (their examples are nodes, meant to see each other)."""
    tensors = [tensor for _, tensor in iter_tensors(batch.inputs, "inputs")]
    for index, tensor in enumerate(tensors):
        others = tensors[:index] + tensors[index + 1 :]
        if not any(o.dim() >= 1 and o.shape[0] == count and not _square(o, count) for o in others):
            continue
        if _square(tensor, count) and (tensor.is_floating_point() or tensor.dtype == _bool()):
            return True
        edges = (
            tensor.dim() == 2
            and tensor.shape[0] != count
            and tensor.numel() > 0
            and not tensor.is_floating_point()
            and tensor.dtype != _bool()
        )
        if edges and int(tensor.min()) >= 0 and int(tensor.max()) < count:
            return True
    return False


def _square(tensor: Any, count: int) -> bool:
    return tensor.dim() == 2 and tuple(tensor.shape) == (count, count)


def _bool() -> Any:
    import torch

    return torch.bool


def others_replaced(batch: Batch, count: int, keep: int) -> Variant:
    """``batch`` with every example but ``keep`` replaced by a copy of example ``keep``."""

    def replace(tensor: Any) -> Any:
        if tensor.dim() == 0 or tensor.shape[0] != count:
            return tensor
        return tensor[keep : keep + 1].expand_as(tensor).clone()

    return Variant(batch.mapped(lambda value: map_tensors(value, replace)), 0, "others")


def padding_added(batch: Batch, count: int, model: Any) -> Variant | None:
    """``batch`` with more padded positions at the end of every sequence tensor, or
    ``None`` when the batch shows no right-padding to copy (see the module doc)."""
    found = _padded_position(batch, count, model)
    if found is None:
        return None
    length, row, column = found
    grown = max(2, length // 2)

    def pad(tensor: Any) -> Any:
        import torch

        if tensor.dim() < 2 or tensor.shape[0] != count or tensor.shape[1] != length:
            return tensor
        filler = tensor[row, column].expand(count, grown, *tensor.shape[2:])
        return torch.cat([tensor, filler.to(tensor.dtype)], dim=1)

    return Variant(batch.mapped(lambda value: map_tensors(value, pad)), grown, "padding")


def _padded_position(batch: Batch, count: int, model: Any) -> tuple[int, int, int] | None:
    """``(length, row, column)`` of a padded position of a right-padded batch."""
    for name, tensor in iter_tensors(batch.inputs, "inputs"):
        if tensor.dim() != 2 or tensor.shape[0] != count or tensor.is_floating_point():
            continue
        if "mask" in name.lower() and set(tensor.unique().tolist()) <= {0, 1}:
            pad_value = 1 - int(tensor[0, 0]) if _first_column_constant(tensor) else None
        else:
            pad_value = _padding_index(model, tensor)
        if pad_value is not None:
            position = _trailing_pad(tensor.long(), pad_value)
            if position is not None:
                return int(tensor.shape[1]), *position
    return None


def _first_column_constant(mask: Any) -> bool:
    """Right padding keeps every sequence's first position real: one value in column 0."""
    return bool((mask[:, 0] == mask[0, 0]).all())


def _padding_index(model: Any, ids: Any) -> int | None:
    import torch

    for module in model.modules():
        index = getattr(module, "padding_idx", None)
        if isinstance(module, torch.nn.Embedding) and index is not None:
            return int(index) if bool((ids == index).any()) else None
    return None


def _trailing_pad(values: Any, pad_value: int) -> tuple[int, int] | None:
    """A padded ``(row, column)`` when every row is real positions then padding only."""
    is_pad = values == pad_value
    # Right-padded rows never go from padding back to a real position.
    if bool((is_pad[:, :-1] & ~is_pad[:, 1:]).any()) or not bool(is_pad.any()):
        return None
    if bool(is_pad[:, 0].all()):
        return None
    rows, columns = is_pad.nonzero(as_tuple=True)
    return int(rows[0]), int(columns[0])


def tolerance(dtype: Any) -> float:
    """Relative difference above which two values of ``dtype`` differ: far above the last
    bits a kernel can change, far below what another example or padding changes."""
    import torch

    if dtype in (torch.float16, torch.bfloat16):
        return 4 * float(torch.finfo(dtype).eps)
    return 1e-4


def example_part(tensor: Any, count: int, keep: int) -> Any:
    """Example ``keep``'s part of ``tensor``: ``tensor[keep]`` when dimension 0 runs over
    the examples, ``tensor[:, keep]`` for a sequence-first tensor, else the whole."""
    if tensor.dim() >= 1 and tensor.shape[0] == count:
        return tensor[keep]
    if tensor.dim() >= 2 and tensor.shape[1] == count:
        return tensor[:, keep]
    return tensor


def difference(base: Any, variant: Any) -> float:
    """Largest difference between two parts, relative to the base part's largest value,
    over the positions both have (``inf`` when their ranks differ): padding a variant
    appended, or positions a model trims to the batch's longest sequence, are left out."""
    import torch

    if base.dim() != variant.dim():
        return float("inf")
    for dim, (size, other) in enumerate(zip(base.shape, variant.shape, strict=True)):
        if other != size:
            base, variant = (
                base.narrow(dim, 0, min(size, other)),
                variant.narrow(dim, 0, min(size, other)),
            )
    if not (base.is_floating_point() or base.is_complex()):
        return 0.0 if torch.equal(base, variant) else float("inf")
    a, b = base.detach().double(), variant.detach().double()
    both_nan = a.isnan() & b.isnan()
    if bool((a.isnan() ^ b.isnan()).any()):
        return float("inf")
    diff = (a - b).abs().masked_fill(both_nan, 0.0).nan_to_num(nan=0.0)  # inf - inf
    if diff.numel() == 0:
        return 0.0
    finite = a[a.isfinite()]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    return float(diff.max()) / (scale if scale > 0.0 else 1.0)
