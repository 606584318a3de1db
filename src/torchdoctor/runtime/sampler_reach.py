"""Which indices of its dataset a ``DataLoader``'s sampler can ever draw (TD414).

A sampler hands the loader indices into the loader's dataset, but it is built from its own
arguments: a ``WeightedRandomSampler`` draws from ``range(len(weights))``, a
``RandomSampler`` or ``SequentialSampler`` from ``range(len(data_source))``, a
``DistributedSampler`` shards ``range(len(dataset))`` of the dataset it was given. When
that range is shorter than the loader's dataset, the examples past it are never read, in
any epoch, and nothing fails: the classic cases are one weight per *class* given where one
weight per *example* is expected, and a sampler built over a ``Subset`` (or another
split) while the loader reads the whole dataset, so the sampler's indices pick the wrong
examples and never reach the rest.

Only what the sampler's own arguments prove is reported. A subset chosen on purpose
(``SubsetRandomSampler(train_indices)``, zero weights, ``num_samples`` smaller than the
dataset, which draws a different subset each epoch) and samplers of unknown classes are
left alone. A range longer than the dataset fails loudly (``IndexError``) and is not ours.
Used at the ``check`` depth on the loader it is given and at the ``run`` depth on the first
batch of every loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.rules.registry import finding

__all__ = ["Reach", "dropped_examples", "reach_finding", "sampler_reach"]


@dataclass(frozen=True)
class Reach:
    """A sampler that reaches only the first ``reachable`` of ``size`` examples.

    Attributes:
        sampler: the sampler's class name.
        reachable: how many of the dataset's indices it can ever draw.
        size: ``len()`` of the loader's dataset.
        because: why, in words (``"its 10 weights"``).
        source: ``"weights"`` (one weight per index) or ``"dataset"`` (built over another
            dataset).
    """

    sampler: str
    reachable: int
    size: int
    because: str
    source: str


def sampler_reach(dataset: Any, sampler: Any) -> Reach | None:
    """The :class:`Reach` of ``sampler`` (a loader's sampler or batch sampler) over
    ``dataset``, or ``None`` when it can draw every index or we cannot tell."""
    from torch.utils.data import (
        BatchSampler,
        IterableDataset,
        RandomSampler,
        SequentialSampler,
        WeightedRandomSampler,
    )
    from torch.utils.data.distributed import DistributedSampler

    if dataset is None or sampler is None or isinstance(dataset, IterableDataset):
        return None
    if type(sampler) is BatchSampler:  # the automatic batching around the user's sampler
        sampler = sampler.sampler
    size = _length(dataset)
    if size is None:
        return None
    name = type(sampler).__name__
    if isinstance(sampler, WeightedRandomSampler):
        count = _length(sampler.weights)
        if count is not None and 0 < count < size:
            return Reach(name, count, size, f"its {count} weights", "weights")
        return None
    source: Any
    if isinstance(sampler, (RandomSampler, SequentialSampler)):
        source = sampler.data_source
    elif isinstance(sampler, DistributedSampler):
        source = sampler.dataset
    else:
        return None  # a sampler whose indices we cannot know without drawing them
    if source is dataset:
        return None
    count = _length(source)
    if count is None or not 0 < count < size:
        return None
    what = type(source).__name__
    return Reach(
        name, count, size, f"the {count} examples of the {what} it was built on", "dataset"
    )


def dropped_examples(index_sampler: Any) -> tuple[int, int, int] | None:
    """``(batches, batch_size, dropped)`` per epoch for a loader batched with
    ``drop_last=True`` that drops examples (its sampler's count is not a multiple of the
    batch size); ``None`` otherwise or when the counts are unknown."""
    from torch.utils.data import BatchSampler

    if not isinstance(index_sampler, BatchSampler) or not index_sampler.drop_last:
        return None
    size, batch = _length(index_sampler.sampler), index_sampler.batch_size
    if size is None or not isinstance(batch, int) or batch < 2 or size % batch == 0:
        return None
    return size // batch, batch, size % batch


def _length(value: Any) -> int | None:
    try:
        return int(len(value))
    except Exception:  # noqa: BLE001 - no length (a stream) or one that fails: unknown
        return None


def reach_finding(reach: Reach, where: Location, depth: Depth) -> Finding:
    """TD414 for ``reach``, at ``where``."""
    never = reach.size - reach.reachable
    if reach.source == "weights":
        fix = (
            "Give `WeightedRandomSampler` one weight per example, not per class: "
            "`weights = class_weight[targets]` (a tensor of length `len(dataset)`)."
        )
    else:
        fix = (
            "Build the sampler over the dataset the DataLoader reads "
            "(`RandomSampler(dataset)`, `DistributedSampler(dataset)`), or give the "
            "DataLoader the subset itself; to read chosen indices use "
            "`SubsetRandomSampler(indices)`."
        )
    return finding(
        "TD414",
        f"The DataLoader's {reach.sampler} can only draw indices 0-{reach.reachable - 1} "
        f"({reach.because}) of a dataset of {reach.size}: the other {never} examples are "
        "never read, in any epoch.",
        where,
        depth,
        fix_hint=fix,
        evidence={
            "sampler": reach.sampler,
            "reachable": reach.reachable,
            "dataset_size": reach.size,
            "never_read": never,
            "source": reach.source,
        },
    )
