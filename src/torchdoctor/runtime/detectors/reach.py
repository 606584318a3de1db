"""What a DataLoader's passes read: a sampler that can never draw part of its dataset
(TD414), and an evaluation pass that drops examples (TD415).

The monitor judges each loader once, on its first batch
(:func:`torchdoctor.runtime.sampler_reach.sampler_reach`, also used by ``check``), so the
cost is one look at the sampler per loader. Only loaders built with ``drop_last=True``
whose sampler's count is not a multiple of the batch size are followed batch by batch: a
whole pass over one of them, with gradients off (or every model in eval mode) and no
optimizer step from its first batch to its last, is an evaluation that leaves examples
out of its metrics. A pass stopped early (a ``break``) is not judged. Findings point at
the user's line that drew the pass's first batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchdoctor.findings import Depth, Location
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import BatchEvent, RuntimeDetector
from torchdoctor.runtime.sampler_reach import reach_finding

__all__ = ["EvaluationCoverage", "SamplerReach"]


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


@dataclass(slots=True)
class _Pass:
    """One pass over a loader that drops examples, followed from its first batch."""

    where: Location
    first_step: int
    batches: int = 0
    evaluating: bool = True  # every batch so far drawn while evaluating


@detector("TD415", depth=Depth.RUN)
class EvaluationCoverage(RuntimeDetector):
    """Whole evaluation passes over a ``drop_last=True`` loader that drops examples."""

    def __init__(self) -> None:
        self._passes: dict[int, _Pass] = {}
        self._reported: set[tuple[str | None, int | None]] = set()

    def on_batch(self, event: BatchEvent) -> None:
        drops = event.loader.drops
        if drops is None:
            return
        current = self._passes.get(event.loader_id)
        if current is None or event.first_of_epoch:
            where = self.monitor.user_location(object="DataLoader")
            # Steps of every optimizer: the global step is the most of any one, and an optimizer
            # made for the pass would not move it.
            current = self._passes[event.loader_id] = _Pass(where, self.monitor.steps_taken)
        current.batches += 1
        if current.evaluating and not self._evaluating(one_batch=drops[0] == 1):
            current.evaluating = False
        batches, batch_size, dropped = drops
        if current.batches != batches:
            return
        del self._passes[event.loader_id]
        key = (current.where.path, current.where.line)
        if not current.evaluating or self.monitor.steps_taken != current.first_step:
            return
        if key in self._reported:
            return
        self._reported.add(key)
        read = batches * batch_size
        self.emit(
            finding(
                "TD415",
                f"An evaluation pass (no optimizer step) read {batches} batches of "
                f"{batch_size} from a DataLoader built with "
                f"`drop_last=True` and dropped the last {dropped} of its "
                f"{read + dropped} examples: every metric of this pass leaves them out.",
                current.where,
                Depth.RUN,
                fix_hint="Build evaluation loaders with `drop_last=False` (the default); "
                "average metrics over examples, not batches, so the smaller last batch "
                "counts by its size.",
                evidence={
                    "batches": batches,
                    "batch_size": batch_size,
                    "dropped": dropped,
                    "examples": read + dropped,
                },
            )
        )

    def _evaluating(self, one_batch: bool) -> bool:
        """Gradients are off, or (over a pass of several batches, where the optimizer
        count tells training apart) every watched model is in eval mode."""
        if not self._torch_grad():
            return True
        models = self.monitor.models
        return not one_batch and bool(models) and not any(m.module.training for m in models)

    @staticmethod
    def _torch_grad() -> bool:
        import torch

        return bool(torch.is_grad_enabled())
