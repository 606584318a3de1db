"""A DataLoader whose sampler can never draw part of its dataset (TD414), at run time.

The monitor judges each loader once, on its first batch
(:func:`torchdoctor.runtime.sampler_reach.sampler_reach`, also used by ``check``), so the
cost is one look at the sampler per loader, nothing per batch. The finding points at the
user's line that drew the first batch.
"""

from __future__ import annotations

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.runtime.detectors.base import BatchEvent, RuntimeDetector
from torchdoctor.runtime.sampler_reach import reach_finding

__all__ = ["SamplerReach"]


@detector("TD414", depth=Depth.RUN)
class SamplerReach(RuntimeDetector):
    """Reports each loader whose sampler reaches only part of its dataset, once."""

    def __init__(self) -> None:
        self._judged: set[int] = set()  # loaders (their index samplers' ids) looked at
        self._reported: set[tuple[object, ...]] = set()

    def on_batch(self, event: BatchEvent) -> None:
        reach = event.loader.reach
        if reach is None or event.loader_id in self._judged:
            return
        self._judged.add(event.loader_id)
        where = self.monitor.user_location(object=reach.sampler)
        key = (where.path, where.line, reach)  # a loader rebuilt every epoch: once
        if key not in self._reported:
            self._reported.add(key)
            self.emit(reach_finding(reach, where, Depth.RUN))
