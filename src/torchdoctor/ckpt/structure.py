"""Recognising the parts of a loaded checkpoint: state_dicts, counters, top-level entries.

Pure functions over the loaded object's containers; they read shapes and types, never
tensor values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from torchdoctor.ckpt.safetensors_file import SafetensorsFile

__all__ = ["counters", "is_state_dict", "param_groups", "top_level"]

# epoch, step, global_step, iteration, iter_num (nanoGPT), epoch_idx, num_updates,
# samples_seen, tokens_seen, n_steps, current_epoch, ...
_UNIT = r"(epoch|step|iteration|iter|update|batch|sample|token)s?"
_COUNTER = re.compile(
    rf"(^|_){_UNIT}(_(num|number|count|idx|index|no|done|seen))?$"
    rf"|^(n|num|number|total)_{_UNIT}(_(done|seen))?$",
    re.IGNORECASE,
)


def is_state_dict(value: Any) -> bool:
    """A non-empty mapping of string keys to tensors (``*_extra_state`` entries allowed)."""
    if isinstance(value, SafetensorsFile):
        return len(value) > 0
    if not isinstance(value, Mapping) or not value:
        return False
    import torch

    tensors = 0
    for key, item in value.items():
        if not isinstance(key, str):
            return False
        if isinstance(item, torch.Tensor):
            tensors += 1
        elif not key.endswith("_extra_state"):
            return False
    return tensors > 0


def param_groups(root: Any, path: str) -> Iterator[Mapping[str, Any]]:
    """The parameter groups of the optimizer state_dict at ``path`` in ``root``."""
    node = root
    for part in path.split("/") if path else []:
        node = node[int(part)] if isinstance(node, (list, tuple)) else node[part]
    for group in node.get("param_groups", []) if isinstance(node, Mapping) else []:
        if isinstance(group, Mapping):
            yield group


def top_level(root: Any) -> tuple[tuple[str, str], ...]:
    """``(key, short description)`` for each top-level entry of a checkpoint dict."""
    if not isinstance(root, Mapping) or is_state_dict(root):
        return ()
    return tuple((str(key), _short(value)) for key, value in root.items())


def _short(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"tensor {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if is_state_dict(value):
        return f"state_dict ({len(value)} tensors)"
    if isinstance(value, Mapping):
        if {"state", "param_groups"} <= set(value):
            return "optimizer state_dict"
        return f"dict ({len(value)} entries)"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} ({len(value)} items)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def counters(root: Any) -> tuple[tuple[str, str], ...]:
    """Top-level epoch/step counters and their values, as text."""
    if not isinstance(root, Mapping) or is_state_dict(root):
        return ()
    found = []
    for key, value in root.items():
        if isinstance(key, str) and _COUNTER.search(key) and _is_number(value):
            found.append((key, str(value.item() if hasattr(value, "item") else value)))
    return tuple(found)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return hasattr(value, "numel") and value.numel() == 1
