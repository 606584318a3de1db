"""CUDA-only facts: allocator figures and host-device synchronisations per step.

Everything here is behind ``torch.cuda.is_available()`` and only used when the watched
parameters live on a CUDA device, so CPU runs never touch CUDA. Synchronisations are
counted with ``torch.cuda.set_sync_debug_mode("warn")`` during one step every few sampled
steps: PyTorch warns at each synchronising call, and a temporary ``always`` filter plus a
counting ``showwarning`` turn those warnings into a number (they are not shown or
reported as warnings). Both are removed by identity, so the user's warning settings are
left exactly as they were.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from typing import Any

__all__ = ["SyncCounter", "cuda_memory_facts"]

_SYNC_MESSAGE = "called a synchronizing CUDA operation"


def cuda_memory_facts(torch: Any, device: Any) -> dict[str, Any]:
    """Allocated, reserved and peak memory of ``device``, in MiB."""
    mib = 1024 * 1024
    return {
        "device": str(device),
        "name": torch.cuda.get_device_name(device),
        "allocated_mib": round(torch.cuda.memory_allocated(device) / mib, 1),
        "reserved_mib": round(torch.cuda.memory_reserved(device) / mib, 1),
        "peak_allocated_mib": round(torch.cuda.max_memory_allocated(device) / mib, 1),
        "peak_reserved_mib": round(torch.cuda.max_memory_reserved(device) / mib, 1),
    }


class SyncCounter:
    """Counts synchronising CUDA calls between :meth:`start` and :meth:`stop`."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._filter: tuple[Any, ...] | None = None
        self._previous_mode: int = 0
        self._previous_show: Any = None
        self._ours: Any = None
        self.count = 0
        self.windows: list[int] = []

    @property
    def active(self) -> bool:
        """Whether a counting window is open."""
        return self._filter is not None

    def start(self) -> None:
        """Open a counting window."""
        torch = self._torch
        self.count = 0
        self._previous_mode = torch.cuda.get_sync_debug_mode()
        self._filter = ("always", re.compile(re.escape(_SYNC_MESSAGE)), Warning, None, 0)
        # The filter list is read at every warning, so the new filter works at once. The
        # "already shown" registries are left valid on purpose (no ``_filters_mutated()``):
        # invalidating them would show the user's own warnings a second time. An "always"
        # filter never writes those registries, so removing it leaves nothing behind.
        warnings.filters.insert(0, self._filter)  # type: ignore[attr-defined]
        previous = self._previous_show = warnings.showwarning

        def showwarning(
            message: Any,
            category: Any,
            filename: str,
            lineno: int,
            file: Any = None,
            line: Any = None,
        ) -> None:
            if _SYNC_MESSAGE in str(message):
                self.count += 1
                return
            previous(message, category, filename, lineno, file, line)

        self._ours = showwarning
        warnings.showwarning = showwarning
        torch.cuda.set_sync_debug_mode(1)

    def stop(self) -> None:
        """Close the window; record its count. Safe to call when none is open."""
        if self._filter is None:
            return
        self._torch.cuda.set_sync_debug_mode(self._previous_mode)
        with contextlib.suppress(ValueError):  # the user reset the filters meanwhile
            warnings.filters.remove(self._filter)  # type: ignore[attr-defined]
        if warnings.showwarning is self._ours:
            warnings.showwarning = self._previous_show
        self._filter = None
        self.windows.append(self.count)
