"""DataLoader workers that share one random stream (TD410), tested empirically.

Two workers of a clone of the user's loader each load sample 0 twice. A worker whose two
draws differ draws random numbers; two workers that produce the same draws share a stream.
Nothing is inferred from the torch version: torch reseeds ``torch``, ``random`` and numpy's
global generator per worker, but not generators a dataset carries itself, and not a
``worker_init_fn`` that seeds every worker alike.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.loading import WorkerDraws, draw_in_workers
from torchdoctor.preflight.probes.loader import map_style, torch_loader
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

WORKER_TIMEOUT = 20.0  # seconds a worker may take for one sample


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for key in sorted(value, key=str) for leaf in _leaves(value[key])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def same_sample(first: Any, second: Any) -> bool:
    """Whether two loaded samples are equal, tensor by tensor and value by value."""
    import torch

    a, b = _leaves(first), _leaves(second)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x, y):
                return False
        elif type(x) is not type(y) or not bool(x == y):
            return False
    return True


def own_generators(dataset: Any) -> list[str]:
    """Attributes of the dataset (or the dataset it wraps) holding a random generator."""
    import torch

    kinds: list[type] = [random.Random, torch.Generator]
    try:
        import numpy

        kinds += [numpy.random.Generator, numpy.random.RandomState]
    except ImportError:  # pragma: no cover - numpy comes with the test extras
        pass
    found = [
        f"{type(dataset).__name__}.{key}"
        for key, value in vars(dataset).items()
        if isinstance(value, tuple(kinds))
    ]
    inner = getattr(dataset, "dataset", None)
    return found + (
        own_generators(inner)
        if inner is not None and not found and hasattr(inner, "__dict__")
        else []
    )


def repeats_across_workers(draws: WorkerDraws) -> bool:
    """Whether a worker's two draws differ (the sample is random) while the two workers
    produce the same two results (they share one stream)."""
    (first0, second0), (first1, second1) = draws.worker0, draws.worker1
    return (
        not same_sample(first0, second0)
        and same_sample(first0, first1)
        and same_sample(second0, second1)
    )


def _shared_stream_cause(loader: Any) -> tuple[str, str | None]:
    """Why the workers share a stream (for the message) and the object to blame."""
    init = loader.worker_init_fn
    if init is not None:
        try:
            alone = draw_in_workers(loader, WORKER_TIMEOUT, worker_init_fn=None)
        except Exception:  # noqa: BLE001 - no verdict on the cause; the finding stands
            alone = None
        if alone is not None and not repeats_across_workers(alone):
            name = getattr(init, "__qualname__", type(init).__name__)
            return f": the worker_init_fn `{name}` puts every worker on the same seed", name
    holders = own_generators(loader.dataset)
    if holders:
        return (
            f": the dataset carries its own generator ({', '.join(holders)}), copied "
            "into every worker with the same state",
            holders[0],
        )
    return "", None


@probe("TD410")
def identical_worker_augmentations(ctx: CheckContext, out: Reporter) -> None:
    """Two workers load sample 0 twice each: random draws that repeat across workers."""
    loader = torch_loader(ctx)
    if loader is None or loader.num_workers == 0 or not map_style(loader):
        return
    ctx.raw_batch  # noqa: B018 - a loader that cannot load fails there, explained
    try:
        draws = draw_in_workers(loader, WORKER_TIMEOUT)
    except Exception:  # noqa: BLE001 - the user's dataset failed in a worker: no verdict
        return
    if not repeats_across_workers(draws):
        return
    cause, culprit = _shared_stream_cause(loader)
    out.emit(
        finding(
            "TD410",
            f"The DataLoader's workers draw identical random augmentations: sample 0 "
            "loaded twice in one worker comes out different, but worker 0 and worker 1 produce "
            f"the same two results{cause}. With {loader.num_workers} workers each augmentation "
            f"repeats {loader.num_workers} times per epoch.",
            Location(object=culprit or type(loader.dataset).__name__),
            Depth.CHECK,
            fix_hint="Draw with torch (seeded per worker), or reseed in a `worker_init_fn` from "
            "`torch.utils.data.get_worker_info().seed`, which differs per worker.",
            evidence={"num_workers": loader.num_workers, "cause": culprit},
        )
    )
