"""Lazy access to torch, with one clear error when it is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from torchdoctor.errors import TorchMissingError

__all__ = ["MIN_TORCH", "require_torch", "torch_version"]

MIN_TORCH = (2, 2)


def require_torch(feature: str) -> ModuleType:
    """Import and return torch, or raise :class:`TorchMissingError` naming ``feature``.

    Raises:
        TorchMissingError: torch is not importable, or older than :data:`MIN_TORCH`.
    """
    try:
        torch = importlib.import_module("torch")
    except ImportError as error:
        raise TorchMissingError(
            f"{feature} needs PyTorch, which is not installed ({error}). Install it with "
            "`pip install torch` (see https://pytorch.org/get-started/ for GPU builds). "
            "`torchdoctor lint` works without it."
        ) from None
    if torch_version(torch) < MIN_TORCH:
        raise TorchMissingError(
            f"{feature} needs PyTorch >= {MIN_TORCH[0]}.{MIN_TORCH[1]}; found {torch.__version__}."
        )
    return torch


def torch_version(torch: ModuleType) -> tuple[int, int]:
    """``(major, minor)`` of an imported torch module."""
    major, minor, *_ = (torch.__version__.split("+")[0].split(".") + ["0", "0"])[:3]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)
