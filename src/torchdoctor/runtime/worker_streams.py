"""DataLoader workers that share one random stream (TD410), tested empirically, as one
verdict that ``check`` (on the user's loader) and ``run`` (when a loader with workers
starts iterating) both ask. Light to import: it needs torch only when called.

Two workers of a clone of the loader each load sample 0 twice. A worker whose two draws
differ draws random numbers; two workers that produce the same draws share a stream.
Nothing is inferred from the torch version: torch reseeds ``torch``, ``random`` and
numpy's global generator per worker (``torch/utils/data/_utils/worker.py``, from the
worker's base seed), but not generators a dataset carries itself, and not a
``worker_init_fn`` that seeds every worker alike. The clone's workers write nothing: their
output goes to the null device, so a dataset that prints adds nothing to the user's output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from torchdoctor.runtime.loader_clones import WorkerDraws, draw_in_workers

__all__ = [
    "QuietWorkers",
    "SharedStream",
    "own_generators",
    "repeats_across_workers",
    "same_sample",
    "shared_stream",
]

WORKER_TIMEOUT = 20.0  # seconds a worker may take for one sample


class QuietWorkers:
    """A ``worker_init_fn`` that sends the worker's output to the null device, then runs
    the loader's own (picklable, for workers that are spawned)."""

    def __init__(self, init: Any) -> None:
        self.init = init

    def __call__(self, worker_id: int) -> None:
        import os
        import sys

        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the worker's, to its end
        if self.init is not None:
            self.init(worker_id)


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


def _generator_kinds() -> tuple[type, ...]:
    import torch

    kinds: list[type] = [random.Random, torch.Generator]
    try:
        import numpy

        kinds += [numpy.random.Generator, numpy.random.RandomState]
    except ImportError:  # pragma: no cover - numpy comes with the test extras
        pass
    return tuple(kinds)


def own_generators(dataset: Any) -> list[str]:
    """Attributes of the dataset (or the dataset it wraps) holding a random generator,
    also one level down (a transform object that owns one)."""
    kinds = _generator_kinds()
    found: list[str] = []
    for key, value in vars(dataset).items():
        if isinstance(value, kinds):
            found.append(f"{type(dataset).__name__}.{key}")
        elif key != "dataset" and type(value).__module__ not in ("torch", "numpy"):
            found += [
                f"{type(dataset).__name__}.{key}.{inner}"
                for inner, held in (vars(value).items() if hasattr(value, "__dict__") else ())
                if isinstance(held, kinds)
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


@dataclass(frozen=True, slots=True)
class SharedStream:
    """The verdict: the loader's workers draw one stream; why, and what to blame."""

    num_workers: int
    cause: str
    culprit: str | None
    dataset: str

    def message(self) -> str:
        """The finding's message, the same at every depth."""
        return (
            "The DataLoader's workers draw identical random augmentations: sample 0 "
            "loaded twice in one worker comes out different, but worker 0 and worker 1 "
            f"produce the same two results{self.cause}. With {self.num_workers} workers "
            f"each augmentation repeats {self.num_workers} times per epoch."
        )

    def fix_hint(self) -> str:
        """The finding's fix hint."""
        return (
            "Draw with torch (seeded per worker), or reseed in a `worker_init_fn` from "
            "`torch.utils.data.get_worker_info().seed`, which differs per worker."
        )

    def evidence(self) -> dict[str, Any]:
        """The finding's evidence."""
        return {"num_workers": self.num_workers, "cause": self.culprit}


def _cause(loader: Any, timeout: float) -> tuple[str, str | None]:
    """Why the workers share a stream (for the message) and the object to blame."""
    init = loader.worker_init_fn
    if init is not None:
        try:
            alone = draw_in_workers(loader, timeout, worker_init_fn=QuietWorkers(None))
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


def shared_stream(loader: Any, timeout: float = WORKER_TIMEOUT) -> SharedStream | None:
    """The verdict on a map-style loader with workers (``None``: the workers' draws
    differ, or the samples are not random).

    Raises:
        Exception: whatever the user's dataset raised in a worker (no verdict then).
    """
    draws = draw_in_workers(loader, timeout, worker_init_fn=QuietWorkers(loader.worker_init_fn))
    if not repeats_across_workers(draws):
        return None
    cause, culprit = _cause(loader, timeout)
    return SharedStream(loader.num_workers, cause, culprit, type(loader.dataset).__name__)
