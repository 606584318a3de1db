"""Loss values on their way from ``backward()`` to the detectors.

On the CPU a loss is read with ``.item()`` when ``backward()`` is called (it is on the host
already); on an accelerator it stays a detached 0-d tensor until a batch is stacked and read
back without a synchronisation (:class:`~torchdoctor.runtime.readback.Readback`). Either way,
detectors get batches through ``on_losses``. The stream also asks the sampler for dense
sampling while the loss explodes or turns non-finite.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from torchdoctor.runtime.detectors.base import CallSite, LossValue
from torchdoctor.runtime.detectors.records import maker

if TYPE_CHECKING:
    from torchdoctor.runtime.services import RunServices

__all__ = ["LossStream"]

_loss_value = maker(LossValue)  # one per loss: see maker
_JUMP = 10.0  # a loss this many times its lowest so far makes the sampler look closely


class LossStream:
    """Buffers losses, reads them back in batches, and keeps one curve per call site."""

    def __init__(self, monitor: RunServices) -> None:
        self._m = monitor
        self._device: list[tuple[Any, CallSite, int, int]] = []
        self._host: list[tuple[CallSite, int, int, float]] = []
        self.series: dict[CallSite, list[float]] = {}
        self.last: float | None = None
        self._lowest: float | None = None
        self._saw_non_finite = False
        self._step = 0

    @property
    def pending(self) -> int:
        """Losses waiting to be delivered."""
        return len(self._device) + len(self._host)

    def add(self, loss: Any, site: CallSite, index: int, step: int) -> None:
        """Take one scalar loss (read now on the CPU, kept on the device otherwise)."""
        if loss.is_cpu:
            self._host.append((site, index, step, loss.item()))
        else:
            self._device.append((loss.detach(), site, index, step))

    def flush(self, step: int) -> None:
        """Deliver host values now; start the read-back of device values."""
        self._step = step
        if self._host:
            host, self._host = self._host, []
            self._deliver([item[:3] for item in host], [item[3] for item in host])
        if not self._device:
            return
        pending, self._device = self._device, []
        by_device: dict[Any, list[tuple[Any, CallSite, int, int]]] = {}
        for item in pending:
            by_device.setdefault(item[0].device, []).append(item)
        torch = self._m.torch
        for items in by_device.values():
            with torch.no_grad():
                vector = torch.stack([t.reshape(()).float() for t, *_ in items])
            metas = [meta for _, *meta in items]
            self._m.readback.submit(vector, functools.partial(self._deliver, metas))

    def _deliver(self, metas: list[Any], values: list[float]) -> None:
        batch = [
            _loss_value(value, site, index, step)
            for (site, index, step), value in zip(metas, values, strict=True)
        ]
        for loss in batch:
            self._watch(loss.value)
            self.series.setdefault(loss.site, []).append(loss.value)
        if batch:
            self.last = batch[-1].value
            self._m.dispatch.call("on_losses", batch)

    def _watch(self, value: float) -> None:
        if not math.isfinite(value):
            if not self._saw_non_finite:
                self._saw_non_finite = True
                self._m.sampler.boost(self._step)
        elif self._lowest is None or abs(value) < self._lowest:
            self._lowest = abs(value)
        elif abs(value) > _JUMP * self._lowest + 1e-3:
            self._m.sampler.boost(self._step)
