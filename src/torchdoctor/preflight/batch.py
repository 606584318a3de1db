"""What ``check`` feeds the model: one batch, split into inputs and targets.

Accepted batch shapes (documented in :mod:`torchdoctor.preflight`):

* ``(inputs, targets)``: ``model(inputs)``, or ``model(*inputs)`` when ``inputs`` is a
  tuple or list, or ``model(**inputs)`` when it is a dict;
* ``(input_1, ..., input_k, targets)``: ``model(input_1, ..., input_k)``;
* a dict: the targets are under ``targets``, ``target``, ``labels``, ``label`` or ``y``;
  the inputs under ``inputs``, ``input`` or ``x`` when present (called as above),
  otherwise every other key is passed as a keyword argument.

``data`` may also be a DataLoader (or any other iterable of such batches, a list of batches
included): its first batch is used.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torchdoctor.errors import UsageError

__all__ = ["Batch", "CallStyle", "is_batch", "iter_tensors", "move_to", "split_batch"]

TARGET_KEYS = ("targets", "target", "labels", "label", "y")
INPUT_KEYS = ("inputs", "input", "x")


class CallStyle(enum.Enum):
    """How the inputs are handed to the model."""

    ONE = "model(inputs)"
    ARGS = "model(*inputs)"
    KWARGS = "model(**inputs)"


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch: what the model gets, what the loss compares it with, and how to call."""

    inputs: Any
    targets: Any
    style: CallStyle

    def call(self, model: Any) -> Any:
        """Run ``model`` on the inputs, in the batch's call style."""
        if self.style is CallStyle.ARGS:
            return model(*self.inputs)
        if self.style is CallStyle.KWARGS:
            return model(**self.inputs)
        return model(self.inputs)

    def to(self, device: Any) -> Batch:
        """The same batch with every tensor moved to ``device``."""
        return Batch(move_to(self.inputs, device), move_to(self.targets, device), self.style)


def is_batch(data: Any) -> bool:
    """Whether ``data`` is one batch (a tuple, list or dict) rather than a loader.

    A list whose items are all tuples, lists or dicts is a list of batches, used like a
    loader.
    """
    if (
        isinstance(data, list)
        and data
        and all(isinstance(item, (tuple, list, dict)) for item in data)
    ):
        return False
    return isinstance(data, (tuple, list, dict))


def split_batch(raw: Any) -> Batch:
    """Split a batch into inputs and targets.

    Raises:
        UsageError: the batch has none of the accepted shapes.
    """
    if isinstance(raw, dict):
        return _split_dict(raw)
    if isinstance(raw, (tuple, list)) and len(raw) >= 2:
        if len(raw) > 2:
            return Batch(tuple(raw[:-1]), raw[-1], CallStyle.ARGS)
        return _with_style(raw[0], raw[1])
    raise UsageError(
        f"cannot split a batch of type {type(raw).__name__} into inputs and targets; pass "
        "(inputs, targets), (input_1, ..., targets) or a dict with a 'targets' or 'labels' key"
    )


def _with_style(inputs: Any, targets: Any) -> Batch:
    if isinstance(inputs, dict):
        return Batch(inputs, targets, CallStyle.KWARGS)
    if isinstance(inputs, (tuple, list)):
        return Batch(tuple(inputs), targets, CallStyle.ARGS)
    return Batch(inputs, targets, CallStyle.ONE)


def _split_dict(raw: dict[str, Any]) -> Batch:
    target_key = next((key for key in TARGET_KEYS if key in raw), None)
    if target_key is None:
        raise UsageError(
            f"the batch dict has keys {sorted(raw)} but no targets; put them under one of "
            f"{', '.join(TARGET_KEYS)}"
        )
    input_key = next((key for key in INPUT_KEYS if key in raw), None)
    if input_key is not None:
        return _with_style(raw[input_key], raw[target_key])
    rest = {key: value for key, value in raw.items() if key != target_key}
    return Batch(rest, raw[target_key], CallStyle.KWARGS)


def move_to(value: Any, device: Any) -> Any:
    """``value`` with every tensor inside (tuples, lists, dicts) moved to ``device``."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: move_to(item, device) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(move_to(item, device) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(move_to(item, device) for item in value)
    return value


def iter_tensors(value: Any, name: str) -> Iterator[tuple[str, Any]]:
    """Every tensor inside ``value`` with a readable path: ``inputs``, ``inputs['mask']``."""
    import torch

    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_tensors(item, f"{name}[{key!r}]")
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from iter_tensors(item, f"{name}[{index}]")
