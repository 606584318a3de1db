"""Compare a checkpoint's state_dict with a model's, the way ``load_state_dict`` would.

``strict=True`` loading fails on missing keys, unexpected keys and shape mismatches, and
silently casts tensors of another dtype. :func:`compare` reports each of those, plus a
proposed key mapping (:mod:`torchdoctor.ckpt.mapping`) and whether the mapping would make
the load succeed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchdoctor.ckpt.contents import StateDict
from torchdoctor.ckpt.mapping import KeyMapping, propose_mapping
from torchdoctor.errors import UsageError

__all__ = ["Comparison", "ModelEntry", "compare", "model_entries"]

Shape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One entry of the model's ``state_dict()``: its shape and dtype name."""

    shape: Shape
    dtype: str


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a checkpoint's state_dict fits a model.

    Attributes:
        state_dict_path: which state_dict of the checkpoint was compared (``""`` when the
            file is a bare state_dict).
        model_name: the model's class name.
        model_keys: every key the model's state_dict has.
        missing: model keys the checkpoint lacks.
        unexpected: checkpoint keys the model does not have.
        shape_mismatches: ``(key, checkpoint shape, model shape)``.
        dtype_mismatches: ``(key, checkpoint dtype, model dtype)``; loading casts these.
        mapping: a proposed key renaming (empty when none helps).
        remaining_missing: model keys still missing after the mapping.
        remaining_unexpected: checkpoint keys still unexpected after the mapping.
        remaining_shape_mismatches: keys whose shapes differ after the mapping.
    """

    state_dict_path: str
    model_name: str
    model_keys: tuple[str, ...]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    shape_mismatches: tuple[tuple[str, Shape, Shape], ...]
    dtype_mismatches: tuple[tuple[str, str, str], ...]
    mapping: KeyMapping
    remaining_missing: tuple[str, ...]
    remaining_unexpected: tuple[str, ...]
    remaining_shape_mismatches: tuple[str, ...]

    @property
    def loads_strict(self) -> bool:
        """``load_state_dict(strict=True)`` would succeed as the file is."""
        return not (self.missing or self.unexpected or self.shape_mismatches)

    @property
    def loads_after_mapping(self) -> bool:
        """``strict=True`` loading would succeed once the mapping is applied."""
        return not (
            self.remaining_missing or self.remaining_unexpected or self.remaining_shape_mismatches
        )

    @property
    def matched_after_mapping(self) -> int:
        """Model keys found, with their shape, once the mapping is applied."""
        return (
            len(self.model_keys)
            - len(self.remaining_missing)
            - len(self.remaining_shape_mismatches)
        )


def model_entries(model: Any) -> dict[str, ModelEntry]:
    """The model's state_dict keys with shapes and dtypes, without copying tensors.

    Raises:
        UsageError: ``model`` is not an ``nn.Module``.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise UsageError(
            f"the model factory returned {type(model).__name__}, not a torch.nn.Module"
        )
    lazy = getattr(torch.nn.parameter, "UninitializedTensorMixin", ())
    entries = {}
    for key, value in model.state_dict(keep_vars=True).items():
        if not isinstance(value, torch.Tensor):
            continue
        if isinstance(value, lazy):
            raise UsageError(
                f"the model's {key!r} is an uninitialised lazy parameter; run "
                "one forward pass in the factory before returning the model"
            )
        entries[key] = ModelEntry(tuple(value.shape), str(value.dtype).removeprefix("torch."))
    return entries


def compare(state_dict: StateDict, model: Mapping[str, ModelEntry], model_name: str) -> Comparison:
    """Compare one checkpoint state_dict with a model's entries."""
    ours = state_dict.by_key()
    missing = tuple(k for k in model if k not in ours)
    unexpected = tuple(k for k in ours if k not in model)
    common = [k for k in ours if k in model]
    shapes = tuple(
        (k, ours[k].shape, model[k].shape) for k in common if ours[k].shape != model[k].shape
    )
    dtypes = tuple(
        (k, ours[k].dtype, model[k].dtype)
        for k in common
        if ours[k].shape == model[k].shape and ours[k].dtype != model[k].dtype
    )
    mapping = propose_mapping(
        {k: ours[k].shape for k in unexpected}, {k: model[k].shape for k in missing}
    )
    mapped = {mapping.apply(k): info.shape for k, info in ours.items()}
    return Comparison(
        state_dict_path=state_dict.path,
        model_name=model_name,
        model_keys=tuple(model),
        missing=missing,
        unexpected=unexpected,
        shape_mismatches=shapes,
        dtype_mismatches=dtypes,
        mapping=mapping,
        remaining_missing=tuple(k for k in model if k not in mapped),
        remaining_unexpected=tuple(k for k in ours if mapping.apply(k) not in model),
        remaining_shape_mismatches=tuple(
            k for k in model if k in mapped and mapped[k] != model[k].shape
        ),
    )
