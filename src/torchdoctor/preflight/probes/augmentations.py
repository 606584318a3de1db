"""DataLoader workers that share one random stream (TD410), tested empirically on a clone
of the user's loader; the verdict is :func:`torchdoctor.runtime.worker_streams.
shared_stream`, which ``run`` asks too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.probes.loader import map_style, torch_loader
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.worker_streams import shared_stream

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext


@probe("TD410")
def identical_worker_augmentations(ctx: CheckContext, out: Reporter) -> None:
    """Two workers load sample 0 twice each: random draws that repeat across workers."""
    loader = torch_loader(ctx)
    if loader is None or loader.num_workers == 0 or not map_style(loader):
        return
    ctx.raw_batch  # noqa: B018 - a loader that cannot load fails there, explained
    try:
        verdict = shared_stream(loader)
    except Exception:  # noqa: BLE001 - the user's dataset failed in a worker: no verdict
        return
    if verdict is None:
        return
    out.emit(
        finding(
            "TD410",
            verdict.message(),
            Location(object=verdict.culprit or verdict.dataset),
            Depth.CHECK,
            fix_hint=verdict.fix_hint(),
            evidence=verdict.evidence(),
        )
    )
