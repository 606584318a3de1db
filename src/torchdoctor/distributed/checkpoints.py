"""TD804 at run depth: several ranks write a checkpoint to the same file.

While a multi-rank job is watched by ``torchdoctor run``, ``torch.save`` to a path is
noted on every rank as a finding at the user's line, with the resolved path as its
object. Each rank only knows its own writes, so the finding is a candidate: the merge of
the ranks' reports (:mod:`torchdoctor.distributed.merge`) keeps it only where two or more
ranks wrote the same path from the same line. Rank-specific paths (``ckpt_rank1.pt``) and
rank-0-only saving never meet that bar.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torchdoctor.distributed.tracking import Patches, before_call
from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import detector
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.base import MonitorView, RuntimeDetector

__all__ = ["CheckpointOnEveryRank"]


@detector("TD804", depth=Depth.RUN)
class CheckpointOnEveryRank(RuntimeDetector):
    """Notes ``torch.save(obj, path)`` on the ranks of a job (merged across ranks)."""

    def __init__(self) -> None:
        self._patches = Patches(alive=self.attached)
        self._error: BaseException | None = None
        self._seen: set[tuple[str, int, str]] = set()

    def on_attach(self, monitor: MonitorView) -> None:
        super().on_attach(monitor)
        if getattr(monitor.options, "command", "") != "run":
            return  # only a run merges the ranks' reports, which this rule needs
        import torch

        self._torch = torch
        self._patches.wrap(torch, "save", before_call(self._patches, self._saving, self._failed))

    def _failed(self, error: BaseException) -> None:
        self._error = error

    def _saving(self, obj: Any, f: Any = None, *args: Any, **kwargs: Any) -> None:
        target = kwargs.get("f", f)
        if not isinstance(target, (str, os.PathLike)):
            return
        dist = getattr(self._torch, "distributed", None)
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return
        world = dist.get_world_size()
        if world < 2:
            return
        site = self.monitor.user_site()
        path = str(Path(os.fspath(target)).resolve())
        key = (site.path if site else "", site.line if site else 0, path)
        if key in self._seen:
            return
        self._seen.add(key)
        where = site.location(object=path) if site else Location(object=path)
        self.emit(
            finding(
                "TD804",
                f"Several ranks write the checkpoint `{Path(path).name}` to the same file: "
                f"{world} processes write the same bytes to `{path}` at the same moment, for "
                "N times the I/O, and a reader (or a resume after a crash) can meet a file "
                "that another rank is still truncating",
                where,
                Depth.RUN,
                evidence={"path": path, "world_size": world},
                fix_hint="Save on rank 0 only (`if dist.get_rank() == 0: torch.save(...)`) and "
                "call `dist.barrier()` before other ranks read the file.",
            )
        )

    def on_finish(self, report: Report) -> None:
        self._patches.remove()
        if self._error is not None:
            raise self._error  # reported once as TD001 by the dispatcher
