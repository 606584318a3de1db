"""Clones of a DataLoader that read its dataset with its settings, never advancing the
user's loader: what ``check`` and the ``run`` detectors that probe a loader's workers both
use (:mod:`torchdoctor.preflight.loading` builds the rest of check's reading on them).

Clones' workers are never persistent and are always shut down.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerDraws", "clone_loader", "draw_in_workers", "shut_down"]


def _settings(loader: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "batch_size": loader.batch_size,
        "collate_fn": loader.collate_fn,
        "num_workers": loader.num_workers,
        "drop_last": loader.drop_last,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
    }
    if loader.num_workers > 0:
        settings["prefetch_factor"] = loader.prefetch_factor
    return settings


def _build(loader: Any, settings: dict[str, Any]) -> Any:
    from torch.utils.data import DataLoader, IterableDataset

    dataset = loader.dataset
    if settings["num_workers"] == 0 and isinstance(dataset, IterableDataset):
        # Read in this process, a stream would advance the user's own object (workers
        # read copies): read a copy here too. Raises when it cannot be copied.
        dataset = copy.deepcopy(dataset)
    if settings["num_workers"] == 0:
        settings.pop("prefetch_factor", None)
    return DataLoader(dataset, **settings)


def clone_loader(loader: Any, **overrides: Any) -> Any:
    """A DataLoader over the same dataset with the same settings, reading in order.

    Workers are never persistent, so dropping the clone's iterator ends them.

    Raises:
        copy.Error, TypeError, RuntimeError: an iterable dataset read in this process
            cannot be copied.
    """
    from torch.utils.data import IterableDataset, SequentialSampler

    settings = _settings(loader)
    if not isinstance(loader.dataset, IterableDataset):
        settings["sampler"] = SequentialSampler(loader.dataset)
    settings.update(overrides)
    if settings["num_workers"] > 0:
        settings.setdefault("prefetch_factor", loader.prefetch_factor)
    return _build(loader, settings)


def shut_down(iterator: Any) -> None:
    """End a DataLoader iterator's worker processes now (a no-op for other iterators)."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()


@dataclass(frozen=True, slots=True)
class WorkerDraws:
    """Sample 0 loaded twice by each of two workers (``None`` when it could not run)."""

    worker0: tuple[Any, Any]
    worker1: tuple[Any, Any]


def draw_in_workers(loader: Any, timeout: float, **overrides: Any) -> WorkerDraws:
    """Load sample 0 four times with two workers, alternating (w0, w1, w0, w1)."""
    clone = clone_loader(
        loader,
        batch_size=None,
        sampler=[0, 0, 0, 0],
        num_workers=2,
        collate_fn=None,
        drop_last=False,
        timeout=timeout,
        **overrides,
    )
    iterator = iter(clone)
    try:
        first0, first1, second0, second1 = (next(iterator) for _ in range(4))
    finally:
        shut_down(iterator)
        del iterator
    return WorkerDraws((first0, second0), (first1, second1))
