"""Process-wide state that ``check`` could disturb: random generators and torch's modes.

:class:`ProcessState` records the RNGs (torch CPU, CUDA when initialised, numpy when
imported, :mod:`random`) and the global switches a probe or the user's code may flip
(grad and anomaly modes, deterministic algorithms, cuDNN and oneDNN switches, the default
dtype and the thread count), and puts them back. The TF32 and matmul-precision settings
are left alone: nothing in ``check`` sets them, and torch raises on reading them once old
and new APIs were mixed. Part of
:class:`torchdoctor.preflight.snapshot.Snapshot`.
"""

from __future__ import annotations

import random
import sys
from typing import Any

__all__ = ["ProcessState", "process_differences"]


class ProcessState:
    """The RNG states and global torch flags of this process, to put back."""

    def __init__(self) -> None:
        self.rng = _save_rng()
        self.flags = _save_flags()

    def restore(self) -> None:
        """Put the generators and flags back (cheap when nothing changed)."""
        _restore_rng(self.rng)
        _restore_flags(self.flags)


def _save_rng() -> dict[str, Any]:
    import torch

    saved: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        saved["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        saved["numpy"] = numpy.random.get_state()
    return saved


def _restore_rng(saved: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(saved["torch"])
    random.setstate(saved["random"])
    if "cuda" in saved:
        torch.cuda.set_rng_state_all(saved["cuda"])
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in saved:
        numpy.random.set_state(saved["numpy"])


def _save_flags() -> dict[str, Any]:
    import torch

    backends = torch.backends
    return {
        "grad": torch.is_grad_enabled(),
        "anomaly": (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn": (backends.cudnn.enabled, backends.cudnn.deterministic, backends.cudnn.benchmark),
        "mkldnn": backends.mkldnn.enabled,
        "default_dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
    }


def _restore_flags(saved: dict[str, Any]) -> None:
    import torch

    backends = torch.backends
    torch.set_grad_enabled(saved["grad"])
    torch.set_anomaly_enabled(*saved["anomaly"])
    torch.use_deterministic_algorithms(
        saved["deterministic"], warn_only=saved["deterministic_warn_only"]
    )
    backends.cudnn.enabled, backends.cudnn.deterministic, backends.cudnn.benchmark = saved["cudnn"]
    backends.mkldnn.enabled = saved["mkldnn"]
    torch.set_default_dtype(saved["default_dtype"])
    if torch.get_num_threads() != saved["threads"]:
        torch.set_num_threads(saved["threads"])


def process_differences(before: ProcessState, after: ProcessState) -> list[str]:
    """What differs between two records of the process's state (for tests)."""
    import torch

    first, second = before.rng, after.rng
    problems = []
    if not torch.equal(first["torch"], second["torch"]):
        problems.append("torch RNG state differs")
    if first["random"] != second["random"]:
        problems.append("random RNG state differs")
    if "numpy" in first and "numpy" in second:
        a, b = first["numpy"], second["numpy"]
        if a[0] != b[0] or (a[1] != b[1]).any() or a[2:] != b[2:]:
            problems.append("numpy RNG state differs")
    if (
        "cuda" in first
        and "cuda" in second
        and not all(torch.equal(x, y) for x, y in zip(first["cuda"], second["cuda"], strict=False))
    ):
        problems.append("CUDA RNG state differs")
    problems += [
        f"flag {key} differs" for key in before.flags if before.flags[key] != after.flags[key]
    ]
    return problems
