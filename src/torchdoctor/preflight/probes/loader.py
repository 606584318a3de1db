"""The DataLoader, when ``check`` is given one: an unshuffled loader over grouped labels
(TD407), time spent waiting for data (TD409), unpinned memory on CUDA (TD411) and worker
restarts that cost a noticeable share of an epoch (TD412). Workers that share one random
stream (TD410) are in :mod:`torchdoctor.preflight.probes.augmentations`.

Measurements run on clones of the loader (see :mod:`torchdoctor.preflight.loader_timing`):
the user's loader, sampler and workers are never touched. The data-bound verdict rests on
the ratio of the loader's time per batch to the step's, each the fastest of several
timings (with workers, the in-process cost shared among them when workers starved of CPU
deliver slower), with a margin of 2 (:func:`data_bound`); no absolute time decides it, so
a busy machine slows both sides without flipping it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchdoctor.findings import Depth, Finding, Location
from torchdoctor.preflight.batch import iter_tensors
from torchdoctor.preflight.loader_timing import LoaderTiming, time_loader
from torchdoctor.preflight.loading import labels_in_order
from torchdoctor.preflight.registry import probe
from torchdoctor.preflight.training import CopyUnavailable, copy_for_training, train_step
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.sampler_reach import reach_finding, sampler_reach

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext

TIMING_BUDGET = 2.0  # seconds of loading timed, at most
DATA_BOUND_SHARE = 0.5  # waiting for data at least this share of an iteration is reported,
MARGIN = 2.0  # when it still holds with the step this many times slower than measured
SHARED_STEPS = 3  # steps timed by the overfit run that spare the loader probe its own
RESTART_SHARE = 0.05  # worker start-up at least this share of an epoch is reported
GROUPED = 0.25  # label changes at most this share of a shuffled order's count: grouped
LOADER = Location(object="DataLoader")


def torch_loader(ctx: CheckContext) -> Any | None:
    """The user's ``torch.utils.data.DataLoader``, or ``None`` (a batch, another iterable)."""
    from torch.utils.data import DataLoader

    return ctx.loader if isinstance(ctx.loader, DataLoader) else None


def map_style(loader: Any) -> bool:
    from torch.utils.data import IterableDataset

    return not isinstance(loader.dataset, IterableDataset)


# --- TD407 ------------------------------------------------------------------------------------


def unshuffled_sampler(loader: Any) -> str | None:
    """How the loader reads in order (``"SequentialSampler (shuffle=False)"``), or ``None``
    when it shuffles or uses a sampler we do not know."""
    from torch.utils.data import BatchSampler, SequentialSampler
    from torch.utils.data.distributed import DistributedSampler

    if not map_style(loader):
        return None
    batches = loader.batch_sampler
    if batches is not None and not (
        type(batches) is BatchSampler and batches.sampler is loader.sampler
    ):
        return None  # a custom batch sampler decides the order
    if type(loader.sampler) is SequentialSampler:
        return "SequentialSampler (shuffle=False)"
    if isinstance(loader.sampler, DistributedSampler) and not loader.sampler.shuffle:
        return "DistributedSampler(shuffle=False)"
    return None


def label_changes(labels: list[int]) -> tuple[int, float]:
    """Class changes between consecutive labels, and how many a shuffled order would have."""
    changes = sum(a != b for a, b in zip(labels, labels[1:], strict=False))
    counts = Counter(labels)
    same = sum((n / len(labels)) ** 2 for n in counts.values())
    return changes, (len(labels) - 1) * (1.0 - same)


@probe("TD407")
def train_loader_not_shuffled(ctx: CheckContext) -> Iterator[Finding]:
    """An in-order training loader whose targets come grouped by class."""
    loader = torch_loader(ctx)
    order = unshuffled_sampler(loader) if loader is not None else None
    if loader is None or order is None:
        return
    labels = labels_in_order(loader.dataset, budget=1.0)
    if labels is None or len(set(labels)) < 2:
        return
    changes, expected = label_changes(labels)
    if expected < 1.0 or changes > GROUPED * expected:
        return
    first = [t for _, t in iter_tensors(ctx.batch_as_given.targets, "targets")]
    in_first = len(set(first[0].reshape(-1).tolist())) if first else None
    yield finding(
        "TD407",
        f"The training DataLoader reads the dataset in order ({order}) and its "
        f"targets are grouped by class: {changes} class changes across {len(labels)} evenly "
        f"spaced samples, where a shuffled order has about {expected:.0f}"
        + (f"; the first batch holds {in_first} class(es)." if in_first is not None else "."),
        LOADER,
        Depth.CHECK,
        fix_hint="Pass `shuffle=True` to the training DataLoader (or `shuffle=True` to its "
        "DistributedSampler and call `set_epoch()` every epoch).",
        evidence={
            "sampler": order,
            "label_changes": changes,
            "shuffled_changes": round(expected, 1),
            "samples_read": len(labels),
            "classes_in_first_batch": in_first,
        },
    )


# --- TD414 ------------------------------------------------------------------------------------


@probe("TD414")
def sampler_reaches_part(ctx: CheckContext) -> Iterator[Finding]:
    """A sampler whose own arguments keep it from ever drawing part of the dataset."""
    loader = torch_loader(ctx)
    if loader is None:
        return
    reach = sampler_reach(
        loader.dataset, loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    )
    if reach is not None:
        yield reach_finding(reach, Location(object=reach.sampler), Depth.CHECK)


# --- TD411 ------------------------------------------------------------------------------------


@probe("TD411")
def pin_memory_off_with_cuda(ctx: CheckContext) -> Iterator[Finding]:
    """Training on CUDA from a loader that does not pin its batches."""
    loader = torch_loader(ctx)
    if loader is None or ctx.device.type != "cuda" or loader.pin_memory:
        return
    size = sum(
        t.numel() * t.element_size()
        for _, t in (
            *iter_tensors(ctx.batch_as_given.inputs, "inputs"),
            *iter_tensors(ctx.batch_as_given.targets, "targets"),
        )
        if t.device.type == "cpu"
    )
    yield finding(
        "TD411",
        f"Training runs on {ctx.device} from a DataLoader with pin_memory=False: "
        f"each batch ({size / 2**20:.2f} MiB) is copied to the GPU from pageable memory, "
        "which is slower and cannot overlap with compute.",
        LOADER,
        Depth.CHECK,
        fix_hint="Pass `pin_memory=True` to the DataLoader and copy batches with "
        "`.to(device, non_blocking=True)`.",
        evidence={"batch_bytes": size, "device": str(ctx.device)},
    )


# --- TD409 and TD412: timing ------------------------------------------------------------------


def step_seconds(ctx: CheckContext) -> float | None:
    """Seconds of one training step on a copy: the fastest of a few, after a warm-up.

    Steps are timed with the thread count the check runs with and, when that is more
    than one, single-threaded too: on a machine whose cores are busy, a small model's
    multi-threaded step can take fifty times longer than the same step alone, which says
    nothing about the training run. The fastest step is the closest to the step's own
    cost, as the fastest batch is the loader's (see :func:`time_loader`). When the check
    runs single-threaded, steps the overfit run already timed
    (:attr:`CheckContext.step_times`) are used if there are enough of them.
    """
    import torch

    threads = torch.get_num_threads()
    if threads == 1 and len(ctx.step_times) >= SHARED_STEPS:
        return min(ctx.step_times)
    try:
        training = copy_for_training(ctx)
    except CopyUnavailable:
        return None
    _timed_step(ctx, training)  # allocates the optimizer state, warms the caches
    try:
        times = []
        for count in (threads, 1, threads) if threads > 1 else (1, 1, 1):
            torch.set_num_threads(count)
            times.append(_timed_step(ctx, training))
    finally:
        torch.set_num_threads(threads)
    return min(times)


def _timed_step(ctx: CheckContext, training: Any) -> float:
    import torch

    cuda = ctx.device.type == "cuda"
    torch.manual_seed(ctx.seed)  # before the clock: seeding is the check's cost, not the step's
    begin = time.perf_counter()
    train_step(training, ctx.batch, None)
    if cuda:  # kernels run asynchronously: wait for them before reading the clock
        torch.cuda.synchronize(ctx.device)
    return time.perf_counter() - begin


def waiting_share(timing: LoaderTiming, step: float, workers: int) -> float:
    """The share of each iteration spent waiting for data. Without workers loading and
    training take turns; with workers they overlap and only the excess is waited for."""
    wait = timing.delivered if workers == 0 else max(0.0, timing.delivered - step)
    return wait / (wait + step) if wait + step > 0 else 0.0


def data_bound(timing: LoaderTiming, step: float, workers: int) -> bool:
    """Whether training would wait for data at least half the time even if the step took
    :data:`MARGIN` times longer than measured: a verdict that timing noise cannot flip."""
    return waiting_share(timing, step * MARGIN, workers) >= DATA_BOUND_SHARE


@probe("TD409", "TD412")
def input_pipeline_bound(ctx: CheckContext) -> Iterator[Finding]:
    """Time the loader and a training step: report waiting for data (TD409) and worker
    restarts that cost a noticeable share of each epoch (TD412)."""
    loader = torch_loader(ctx)
    if loader is None:
        return
    ctx.train_pass.require_loss()
    try:
        timing = time_loader(loader, TIMING_BUDGET, max(6, 3 * loader.num_workers))
    except Exception:  # noqa: BLE001 - a later batch failed, or a stream cannot be copied
        return
    step = step_seconds(ctx)
    if timing is None or step is None:
        return
    workers = loader.num_workers
    share = waiting_share(timing, step, workers)
    evidence = {
        "seconds_per_batch": timing.delivered,
        "seconds_per_step": step,
        "batch_to_step_ratio": round(timing.delivered / step, 3) if step else None,
        "batches_timed": timing.batches,
        "num_workers": workers,
        "waiting_share": round(share, 3),
    }
    if timing.shared_in_process is not None:
        evidence["seconds_per_batch_from_workers"] = timing.per_batch
    if ctx.enabled("TD409") and data_bound(timing, step, workers):
        yield _data_bound(timing, step, workers, share, evidence)
    if ctx.enabled("TD412") and workers > 0 and not loader.persistent_workers:
        restart = _restart(loader, timing, step, evidence)
        if restart is not None:
            yield restart


def _data_bound(
    timing: LoaderTiming, step: float, workers: int, share: float, evidence: dict[str, Any]
) -> Finding:
    how = "in the training process (num_workers=0)" if workers == 0 else f"with {workers} workers"
    hint = (
        "Load in worker processes (`num_workers=4` or more, up to the free CPU cores) "
        "and make `__getitem__` cheaper (decode once and cache)."
        if workers == 0
        else f"Make `__getitem__` cheaper (decode once and cache, augment on the GPU), or "
        f"add workers if CPU cores are free (now {workers})."
    )
    return finding(
        "TD409",
        f"Loading one batch takes {timing.delivered * 1e3:.1f} ms {how} and a "
        f"training step {step * 1e3:.1f} ms: training would wait for data {share:.0%} of "
        "the time.",
        LOADER,
        Depth.CHECK,
        fix_hint=hint,
        evidence=evidence,
    )


def restart_share(timing: LoaderTiming, step: float, batches: int) -> tuple[float, float]:
    """Worker start-up as a share of an epoch, and the estimated seconds per iteration
    (the slower of loading and training, since workers overlap the two)."""
    iteration = max(timing.per_batch, step)
    total = timing.startup + batches * iteration
    return (timing.startup / total if total > 0 else 0.0), iteration


def _restart(
    loader: Any, timing: LoaderTiming, step: float, evidence: dict[str, Any]
) -> Finding | None:
    try:
        batches = len(loader)
    except TypeError:
        return None
    share, iteration = restart_share(timing, step, batches)
    if share < RESTART_SHARE:
        return None
    return finding(
        "TD412",
        f"Every epoch restarts the DataLoader's {loader.num_workers} workers "
        f"(persistent_workers=False): its first batch takes {timing.startup * 1e3:.0f} ms "
        f"longer than the next ones, {share:.0%} of an estimated epoch of {batches} batches "
        f"x {iteration * 1e3:.1f} ms.",
        LOADER,
        Depth.CHECK,
        fix_hint="Pass `persistent_workers=True` to the DataLoader.",
        evidence={
            **evidence,
            "startup_seconds": timing.startup,
            "restart_share": share,
            "batches_per_epoch": batches,
        },
    )
