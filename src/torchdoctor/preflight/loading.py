"""Clones of a DataLoader: the batches ``check`` reads, and what the loader probes read.

Nothing here advances the user's loader, its sampler or its generators: batches come
from a clone built from the same dataset and settings, either reading in order (timing,
worker draws) or replaying the user's own order with copies of its sampler and generator
(:func:`replay_loader`, the check's first batches). A loader whose class changes how it
iterates cannot be cloned; :class:`LoaderState` puts back what iterating it changes.
Clones' workers are never persistent and are always shut down, and every read honours a
time budget. Timing a loader is :mod:`torchdoctor.preflight.loader_timing`'s.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from torchdoctor.runtime.loader_clones import (
    WorkerDraws,
    _build,
    _settings,
    clone_loader,
    draw_in_workers,
    shut_down,
)

__all__ = [
    "LoaderState",
    "WorkerDraws",
    "clone_loader",
    "draw_in_workers",
    "labels_in_order",
    "replay_loader",
    "shut_down",
]

SAMPLED_LABELS = 64


def replayable(loader: Any) -> bool:
    """Whether ``loader`` is a DataLoader whose class iterates as DataLoader does, so a
    clone of it yields the same batches."""
    from torch.utils.data import DataLoader

    kind = type(loader)
    return (
        isinstance(loader, DataLoader)
        and kind.__iter__ is DataLoader.__iter__
        and kind._get_iterator is DataLoader._get_iterator
    )


def replay_loader(loader: Any) -> Any:
    """A clone whose first pass yields what the user's loader's next pass would.

    The sampler, batch sampler and generator are deep copies (sharing the dataset), so
    drawing the order advances none of the user's.

    Raises:
        copy.Error, TypeError, RuntimeError: the sampler (or an iterable dataset read in
            this process) cannot be copied.
    """
    from torch.utils.data import IterableDataset

    memo: dict[int, Any] = {id(loader.dataset): loader.dataset}
    settings = _settings(loader)
    settings["generator"] = copy.deepcopy(loader.generator, memo)
    if isinstance(loader.dataset, IterableDataset):
        pass  # no sampler: the stream (or each worker's copy) decides the order
    elif loader.batch_sampler is None:  # no automatic batching: the sampler yields samples
        settings["sampler"] = copy.deepcopy(loader.sampler, memo)
    else:
        settings.update(
            batch_size=1, drop_last=False, batch_sampler=copy.deepcopy(loader.batch_sampler, memo)
        )
    return _build(loader, settings)


class LoaderState:
    """What iterating a loader in place changes, saved to be put back: the random
    generators of the loader, its sampler and batch sampler, and a persistent loader's
    cached iterator (whose workers :meth:`restore` shuts down)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._iterator = vars(loader).get("_iterator") if hasattr(loader, "__dict__") else None
        holders = [
            loader,
            getattr(loader, "sampler", None),
            getattr(loader, "batch_sampler", None),
            getattr(getattr(loader, "batch_sampler", None), "sampler", None),
        ]
        self._generators = [(g, g.get_state()) for g in _generators(holders)]

    def restore(self) -> None:
        """Shut down workers started since, and rewind the generators."""
        current = vars(self._loader).get("_iterator") if hasattr(self._loader, "__dict__") else None
        if current is not None and current is not self._iterator:
            shut_down(current)
            self._loader._iterator = self._iterator
        for generator, state in self._generators:
            generator.set_state(state)


def _generators(holders: list[Any]) -> list[Any]:
    import torch

    found: dict[int, Any] = {}
    for holder in holders:
        for value in vars(holder).values() if hasattr(holder, "__dict__") else ():
            if isinstance(value, torch.Generator):
                found.setdefault(id(value), value)
    return list(found.values())


def _integer(value: Any) -> int | None:
    import numbers

    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_floating_point() or value.dtype == torch.bool:
            return None
        return int(value.item())
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def _known_targets(dataset: Any) -> Any | None:
    """Targets a dataset exposes without loading samples, in dataset order."""
    import torch
    from torch.utils.data import Subset, TensorDataset

    if isinstance(dataset, Subset):
        inner = _known_targets(dataset.dataset)
        return None if inner is None else [inner[int(i)] for i in dataset.indices]
    if isinstance(dataset, TensorDataset):
        last = dataset.tensors[-1]
        return last if last.dim() == 1 and not last.is_floating_point() else None
    for key in ("targets", "labels"):
        values = getattr(dataset, key, None)
        if values is not None and not isinstance(values, (str, bytes)):
            try:
                if len(values) == len(dataset):
                    return values if not isinstance(values, torch.Tensor) else values.view(-1)
            except TypeError:
                continue
    return None


def labels_in_order(dataset: Any, budget: float) -> list[int] | None:
    """Integer targets at up to 64 evenly spaced positions of the dataset, in order.

    Returns ``None`` when the targets are not integers (a regression) or unavailable.
    """
    from torchdoctor.preflight.batch import split_batch

    size = len(dataset)
    if size < 2:
        return None
    positions = sorted(
        {round(i * (size - 1) / (SAMPLED_LABELS - 1)) for i in range(min(SAMPLED_LABELS, size))}
    )
    known = _known_targets(dataset)
    labels: list[int] = []
    begin = time.perf_counter()
    for position in positions:
        if known is not None:
            value = known[position]
        else:
            if time.perf_counter() - begin > budget:
                break
            try:
                value = split_batch(dataset[position]).targets
            except Exception:  # noqa: BLE001 - samples we cannot read or split: no verdict
                return None
        label = _integer(value)
        if label is None:
            return None
        labels.append(label)
    return labels if len(labels) >= 8 else None
