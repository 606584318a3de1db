"""Compare two checkpoints: keys, shapes, dtypes and the largest difference per tensor."""

from __future__ import annotations

from dataclasses import dataclass

from torchdoctor.ckpt.contents import CheckpointContents, LiveTensors, TensorInfo
from torchdoctor.ckpt.values import max_abs_difference

__all__ = ["CheckpointDiff", "TensorDifference", "diff_contents"]


@dataclass(frozen=True, slots=True)
class TensorDifference:
    """One key present in both files.

    Attributes:
        key: the tensor's key.
        shape: its shape in the first file; ``other_shape`` in the second.
        dtype: its dtype in the first file; ``other_dtype`` in the second.
        max_abs_difference: largest absolute elementwise difference, or ``None`` when the
            shapes differ. NaN when NaN sits in only one of the two.
    """

    key: str
    shape: tuple[int, ...]
    other_shape: tuple[int, ...]
    dtype: str
    other_dtype: str
    max_abs_difference: float | None


@dataclass(frozen=True, slots=True)
class CheckpointDiff:
    """Two checkpoints, key by key.

    Attributes:
        only_first: keys only the first file has; ``only_second`` the reverse.
        common: every key both have, in the first file's order.
        aligned_on: ``"tensors"`` (keys compared as full paths) or ``"state_dict"`` (the
            two files keep their weights under different containers, so their primary
            state_dicts were compared key by key).
    """

    only_first: tuple[str, ...]
    only_second: tuple[str, ...]
    common: tuple[TensorDifference, ...]
    aligned_on: str

    @property
    def identical(self) -> bool:
        """Same keys, shapes, dtypes and values."""
        return not (self.only_first or self.only_second) and all(
            d.max_abs_difference == 0.0 and d.dtype == d.other_dtype for d in self.common
        )


def diff_contents(
    first: CheckpointContents,
    first_live: LiveTensors,
    second: CheckpointContents,
    second_live: LiveTensors,
) -> CheckpointDiff:
    """Compare two described checkpoints, reading values one tensor pair at a time."""
    a, b, aligned = _aligned(first, second)
    a_live, b_live = (
        _rekey_live(first_live, first, aligned),
        _rekey_live(second_live, second, aligned),
    )
    common = []
    for key, info in a.items():
        other = b.get(key)
        if other is None:
            continue
        value = None
        if info.shape == other.shape:
            value = max_abs_difference(a_live[key](), b_live[key]())
        common.append(
            TensorDifference(key, info.shape, other.shape, info.dtype, other.dtype, value)
        )
    return CheckpointDiff(
        tuple(k for k in a if k not in b), tuple(k for k in b if k not in a), tuple(common), aligned
    )


def _aligned(
    first: CheckpointContents, second: CheckpointContents
) -> tuple[dict[str, TensorInfo], dict[str, TensorInfo], str]:
    p, q = first.primary, second.primary
    if p is not None and q is not None and p.path != q.path:
        return p.by_key(), q.by_key(), "state_dict"
    return {t.key: t for t in first.tensors}, {t.key: t for t in second.tensors}, "tensors"


def _rekey_live(live: LiveTensors, contents: CheckpointContents, aligned: str) -> LiveTensors:
    primary = contents.primary
    if aligned == "tensors" or primary is None or not primary.path:
        return live
    prefix = primary.path + "/"
    return {key[len(prefix) :]: get for key, get in live.items() if key.startswith(prefix)}
