"""Reading device numbers back to the host without stalling the training loop.

On CUDA a vector is copied into pinned host memory with ``non_blocking=True`` and a CUDA
event is recorded; its callback runs once the event has completed (polled at later steps),
so the monitor never waits for the GPU. On the CPU the numbers are already on the host and
the callback runs at once. :meth:`Readback.flush` forces everything out at the end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torchdoctor._kernel import raised_by_signal_handler

__all__ = ["Readback"]

Callback = Callable[[list[float]], None]


class Readback:
    """A queue of device vectors waiting to reach the host."""

    def __init__(
        self, torch: ModuleType, on_error: Callable[[Callback, BaseException], None]
    ) -> None:
        self._torch = torch
        self._pending: deque[tuple[Any, Any, Callback]] = deque()
        self._on_error = on_error
        self.syncs = 0  # blocking read-backs (non-CUDA accelerators, flush)

    def submit(self, vector: Any, callback: Callback) -> None:
        """Deliver ``vector.tolist()`` to ``callback`` as soon as it is cheap to; never for
        a tensor on the ``meta`` device, which has no values."""
        device = vector.device.type
        if device == "meta":  # shapes without values (a dry run): nothing to read back
            return
        if device == "cpu":
            self._call(callback, vector.tolist())
            return
        if device == "cuda":
            torch = self._torch
            host = torch.empty(vector.shape, dtype=vector.dtype, pin_memory=True)
            host.copy_(vector.detach(), non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self._pending.append((host, event, callback))
            return
        self.syncs += 1  # other accelerators: a plain, blocking copy
        self._call(callback, vector.detach().to("cpu").tolist())

    def poll(self) -> None:
        """Run the callbacks whose copies have completed, in submission order."""
        while self._pending and self._pending[0][1].query():
            host, _, callback = self._pending.popleft()
            self._call(callback, host.tolist())

    def flush(self) -> None:
        """Wait for every pending copy and run its callback (end of the run)."""
        while self._pending:
            host, event, callback = self._pending.popleft()
            event.synchronize()
            self.syncs += 1
            self._call(callback, host.tolist())

    def _call(self, callback: Callback, values: list[float]) -> None:
        try:
            callback(values)
        except Exception as error:  # noqa: BLE001 - a detector's bug must not stop the run
            if raised_by_signal_handler(error):
                raise  # the run's own signal handler (a DataLoader worker died): theirs
            self._on_error(callback, error)
