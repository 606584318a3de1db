"""The DataLoader probes: order (TD407), data-bound training (TD409), identical worker
augmentations (TD410), pinned memory on CUDA (TD411) and worker restarts (TD412)."""

from __future__ import annotations

import multiprocessing

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import (  # noqa: E402
    BatchSampler,
    DataLoader,
    Dataset,
    SequentialSampler,
    Subset,
    TensorDataset,
)
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

from torchdoctor._kernel import Reporter  # noqa: E402
from torchdoctor.findings import Depth, Finding, Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402
from torchdoctor.preflight.context import CheckContext  # noqa: E402
from torchdoctor.preflight.loader_timing import LoaderTiming  # noqa: E402
from torchdoctor.preflight.probes.loader import (  # noqa: E402
    data_bound,
    pin_memory_off_with_cuda,
    restart_share,
    waiting_share,
)

pytestmark = pytest.mark.needs_torch

FEATURES, CLASSES = 8, 4


def _data(size: int = 256, *, sort: bool = False) -> tuple:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    if sort:
        labels = labels.sort().values
    return torch.randn(size, FEATURES, generator=generator), labels


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, CLASSES))


def _run(loader, code):
    model = _model()
    report = check(
        model, loader, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters()), select=[code]
    )
    return report.by_code(code)


class Folders(Dataset):
    """A torchvision-style dataset with a `targets` list, stored class by class."""

    def __init__(self) -> None:
        self.inputs, labels = _data(sort=True)
        self.targets = labels.tolist()

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index):
        return self.inputs[index], self.targets[index]


# --- TD407 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: DataLoader(TensorDataset(*_data(sort=True)), batch_size=32),
        lambda: DataLoader(Folders(), batch_size=32),
        lambda: DataLoader(Subset(Folders(), range(0, 256, 2)), batch_size=32),
        lambda: DataLoader(
            TensorDataset(*_data(sort=True)),
            batch_size=32,
            sampler=DistributedSampler(
                TensorDataset(*_data(sort=True)), num_replicas=1, rank=0, shuffle=False
            ),
        ),
    ],
    ids=["tensor-dataset", "targets-attribute", "subset", "distributed-no-shuffle"],
)
def test_an_in_order_loader_over_sorted_labels_is_reported(make) -> None:
    [found] = _run(make(), "TD407")
    assert found.location.object == "DataLoader"
    assert found.evidence["label_changes"] <= 3
    assert found.evidence["shuffled_changes"] > 30
    assert found.evidence["classes_in_first_batch"] == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: DataLoader(TensorDataset(*_data(sort=True)), batch_size=32, shuffle=True),
        lambda: DataLoader(TensorDataset(*_data()), batch_size=32),  # stored in random order
        lambda: DataLoader(
            TensorDataset(_data()[0], _data()[0][:, 0].sort().values), batch_size=32
        ),
        lambda: DataLoader(
            TensorDataset(*_data(sort=True)),
            batch_sampler=BatchSampler(
                SequentialSampler(range(256)), batch_size=32, drop_last=False
            ),
        ),
        lambda: DataLoader(
            TensorDataset(_data()[0], torch.zeros(256, dtype=torch.long)), batch_size=32
        ),
    ],
    ids=[
        "shuffled",
        "random-storage-order",
        "sorted-float-targets",
        "custom-batch-sampler",
        "one-class",
    ],
)
def test_shuffled_unsorted_regression_or_unknown_orders_are_quiet(make) -> None:
    model = _model()

    def loss_fn(output, target):
        if target.is_floating_point():
            return nn.functional.mse_loss(output[:, 0], target)
        return nn.functional.cross_entropy(output, target)

    report = check(model, make(), loss_fn, torch.optim.Adam(model.parameters()), select=["TD407"])
    assert report.by_code("TD407") == []


# --- TD409 -----------------------------------------------------------------------------------


class Decoded(Dataset):
    """Each sample costs real CPU work, as decoding an image does."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        image = torch.fft.ifft2(torch.fft.fft2(torch.randn(192, 192, generator=generator)))
        return image.real[:FEATURES, 0].contiguous(), index % CLASSES


@pytest.fixture
def fast_step(monkeypatch) -> float:
    """Pin the training step's timing to 0.1 ms. A busy machine only ever lengthens a
    measured step, and a step measured three times too long hid a slow loader in CI; the
    loader's cost is still measured for real, and load only adds to it. The step's own
    timing is tested on its own below."""
    from torchdoctor.preflight.probes import loader as probe

    seconds = 1e-4
    monkeypatch.setattr(probe, "step_seconds", lambda ctx: seconds)
    return seconds


def test_decoding_in_the_training_process_is_reported_with_numbers(fast_step) -> None:
    [found] = _run(DataLoader(Decoded(), batch_size=16, shuffle=True), "TD409")
    assert found.evidence["seconds_per_step"] == fast_step
    assert found.evidence["num_workers"] == 0
    assert found.evidence["waiting_share"] >= 0.5
    assert found.evidence["seconds_per_batch"] > found.evidence["seconds_per_step"]
    assert "num_workers" in found.fix_hint


def test_an_in_memory_dataset_is_not_data_bound() -> None:
    assert _run(DataLoader(TensorDataset(*_data()), batch_size=32, shuffle=True), "TD409") == []


@pytest.mark.parametrize(
    ("per_batch", "step", "workers", "bound"),
    [
        (0.010, 0.002, 0, True),  # loading and training take turns: 83% waiting
        (0.010, 0.012, 0, False),  # 45% waiting
        (0.010, 0.004, 4, True),  # workers overlap, but loading is still 2.5x slower
        (0.010, 0.011, 4, False),  # workers keep up: no waiting at all
    ],
)
def test_the_waiting_share_accounts_for_overlap_with_workers(
    per_batch, step, workers, bound
) -> None:
    timing = LoaderTiming(first_batch=per_batch, per_batch=per_batch, batches=8)
    assert (waiting_share(timing, step, workers) >= 0.5) is bound


@pytest.mark.parametrize(
    ("per_batch", "step", "workers", "bound"),
    [
        (0.010, 0.004, 0, True),  # loading takes 2.5 steps: bound even with a step twice as slow
        (0.010, 0.006, 0, False),  # 62% waiting as measured, but not beyond timing noise
        (0.010, 0.002, 4, True),  # the workers deliver a batch every 5 steps
        (0.010, 0.004, 4, False),  # 60% waiting as measured, within the margin
    ],
)
def test_the_verdict_keeps_a_margin_against_timing_noise(per_batch, step, workers, bound) -> None:
    timing = LoaderTiming(first_batch=per_batch, per_batch=per_batch, batches=8)
    assert data_bound(timing, step, workers) is bound


@pytest.mark.parametrize(
    ("rate", "shared", "bound"),
    [
        (0.010, 0.002, False),  # starved workers deliver slowly; alone they would keep up
        (0.010, 0.020, True),  # loading in this process is no faster: the rate stands
        (0.010, None, True),  # no in-process timing (a stream that cannot be copied)
    ],
)
def test_workers_starved_of_cpu_are_judged_by_their_own_cost(rate, shared, bound) -> None:
    timing = LoaderTiming(first_batch=0.1, per_batch=rate, batches=8, shared_in_process=shared)
    assert timing.delivered == min(rate, shared or rate)
    assert data_bound(timing, 0.002, 2) is bound


class StarvedInWorkers(Dataset):
    """Cheap samples that take long only inside worker processes, as when other processes
    take the CPU from the workers while they load."""

    def __init__(self) -> None:
        self.inputs = _data(64)[0]

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index):
        if torch.utils.data.get_worker_info() is not None:
            Decoded()[index]  # the unrelated work that delays the worker
        return self.inputs[index], index % CLASSES


@pytest.mark.slow
def test_a_loader_whose_workers_are_starved_is_not_called_data_bound() -> None:
    assert _run(DataLoader(StarvedInWorkers(), batch_size=16, num_workers=2), "TD409") == []
    assert multiprocessing.active_children() == []


def test_decoding_in_workers_that_cannot_keep_up_is_reported(fast_step) -> None:
    [found] = _run(DataLoader(Decoded(), batch_size=32, num_workers=2), "TD409")
    assert found.evidence["num_workers"] == 2
    assert found.evidence["batch_to_step_ratio"] >= 4  # the margin, with workers
    assert multiprocessing.active_children() == []


class Jittery(nn.Module):
    """A small model whose every other training step is slowed by unrelated work, as a step
    is when other processes take the CPU for a while."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _model()
        self.calls = 0

    def forward(self, x):
        if self.training and torch.is_grad_enabled():
            self.calls += 1
            for _ in range(20 if self.calls % 2 == 0 else 0):
                torch.linalg.inv(torch.randn(200, 200) + 200 * torch.eye(200))
        return self.net(x)


def test_a_step_slowed_now_and_then_does_not_hide_a_slow_loader(monkeypatch) -> None:
    """The step's fastest timing counts: noise only ever adds time.

    The step clock is replaced by one that makes every other step ten seconds long, as a
    busy machine might (real timings made this test fail under load): the verdict must
    rest on the fast steps, and the slow loader must still be reported."""
    from torchdoctor.preflight.probes import loader as probe

    calls = iter(range(1_000_000))
    monkeypatch.setattr(
        probe, "_timed_step", lambda ctx, training: 10.0 if next(calls) % 2 else 1e-5
    )
    model, users = Jittery(), torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # the timed path (one thread reuses the overfit's steps)
        report = check(
            model,
            DataLoader(Decoded(), batch_size=16),
            nn.CrossEntropyLoss(),
            torch.optim.Adam(model.parameters()),
            select=["TD409"],
        )
    finally:
        torch.set_num_threads(users)
    [found] = report.by_code("TD409")
    assert found.evidence["seconds_per_step"] == pytest.approx(1e-5)
    assert found.evidence["batch_to_step_ratio"] >= 2  # the margin


def test_the_overfit_runs_steps_are_timed_once_for_the_loader_probe(monkeypatch) -> None:
    """Single-threaded, the loader probe reuses the steps the overfit run timed."""
    from torchdoctor.preflight.probes import loader as probe

    copies: list[object] = []
    monkeypatch.setattr(probe, "copy_for_training", lambda ctx: copies.append(ctx))
    # The verdict depends on timings a busy machine can flip; this test is about where the
    # step time comes from, so every measured pair counts as data-bound here.
    monkeypatch.setattr(probe, "data_bound", lambda timing, step, workers: True)
    model, users = _model(), torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        report = check(
            model,
            DataLoader(Decoded(), batch_size=16),
            nn.CrossEntropyLoss(),
            torch.optim.Adam(model.parameters()),
            select=["TD409", "TD605"],
        )
    finally:
        torch.set_num_threads(users)
    [found] = report.by_code("TD409")
    assert copies == [] and found.evidence["seconds_per_step"] > 0


# --- TD412 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("startup", "batches", "reported"),
    [
        (0.2, 8, True),  # 0.2 s of start-up in front of a 0.08 s epoch
        (0.2, 10_000, False),  # negligible in front of a 100 s epoch
    ],
)
def test_the_restart_share_weighs_start_up_against_the_epoch(startup, batches, reported) -> None:
    timing = LoaderTiming(first_batch=startup + 0.01, per_batch=0.01, batches=8)
    share, iteration = restart_share(timing, step=0.005, batches=batches)
    assert iteration == 0.01
    assert (share >= 0.05) is reported


def test_workers_restarted_for_a_short_epoch_are_information() -> None:
    loader = DataLoader(TensorDataset(*_data()), batch_size=32, shuffle=True, num_workers=2)
    [found] = _run(loader, "TD412")
    assert found.severity is Severity.INFO
    assert found.evidence["startup_seconds"] > 0
    assert multiprocessing.active_children() == []  # the probe's workers are gone


def test_persistent_workers_are_quiet() -> None:
    loader = DataLoader(
        TensorDataset(*_data()), batch_size=32, num_workers=2, shuffle=True, persistent_workers=True
    )
    assert _run(loader, "TD412") == []


# --- TD410 -----------------------------------------------------------------------------------


class Jittered(Dataset):
    """Adds random jitter to fixed samples, drawing from the source named."""

    def __init__(self, source: str) -> None:
        self.inputs, self.labels = _data(64)
        self.source = source
        if source == "own-generator":
            self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index):
        if self.source == "own-generator":
            jitter = torch.from_numpy(self.rng.normal(size=FEATURES)).float()
        elif self.source == "numpy-global":
            jitter = torch.from_numpy(np.random.normal(size=FEATURES)).float()
        elif self.source == "torch":
            jitter = torch.randn(FEATURES)
        else:
            jitter = torch.zeros(FEATURES)
        return self.inputs[index] + jitter, self.labels[index]


def _same_numpy_seed(worker_id: int) -> None:
    np.random.seed(0)


def _own_seed(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def _workers(source: str, **options) -> DataLoader:
    return DataLoader(Jittered(source), batch_size=16, shuffle=True, num_workers=2, **options)


def test_a_generator_the_dataset_carries_repeats_in_every_worker() -> None:
    [found] = _run(_workers("own-generator"), "TD410")
    assert found.severity is Severity.ERROR
    assert found.location.object == "Jittered.rng"
    assert "copied into every worker with the same state" in found.message
    assert multiprocessing.active_children() == []


def test_a_worker_init_fn_that_seeds_every_worker_alike_is_reported() -> None:
    [found] = _run(_workers("numpy-global", worker_init_fn=_same_numpy_seed), "TD410")
    assert found.location.object == "_same_numpy_seed"
    assert "puts every worker on the same seed" in found.message


@pytest.mark.parametrize(
    ("source", "options"),
    [
        ("numpy-global", {}),  # torch seeds numpy's global generator in each worker
        ("torch", {}),
        ("own-generator", {"worker_init_fn": _own_seed}),
        ("none", {}),  # no augmentation at all: identical, and rightly so
    ],
    ids=["numpy-global", "torch", "reseeded-in-workers", "deterministic"],
)
def test_per_worker_streams_and_deterministic_datasets_are_quiet(source, options) -> None:
    assert _run(_workers(source, **options), "TD410") == []


# --- TD411 -----------------------------------------------------------------------------------


def _context(loader, device) -> CheckContext:
    model = _model()
    return CheckContext(model, loader, nn.CrossEntropyLoss(), None, device=device)


def _pin_memory_findings(ctx: CheckContext) -> list[Finding]:
    found: list[Finding] = []
    pin_memory_off_with_cuda(ctx, Reporter(found.append, Depth.CHECK, ("TD411",)))
    return found


def test_an_unpinned_loader_feeding_cuda_is_information() -> None:
    loader = DataLoader(TensorDataset(*_data()), batch_size=32, shuffle=True)
    [found] = _pin_memory_findings(_context(loader, "cuda"))
    assert found.severity is Severity.INFO
    assert found.evidence["batch_bytes"] == 32 * FEATURES * 4 + 32 * 8


@pytest.mark.parametrize(("pin", "device"), [(True, "cuda"), (False, "cpu")])
def test_pinned_memory_or_cpu_training_is_quiet(pin, device) -> None:
    loader = DataLoader(TensorDataset(*_data()), batch_size=32, shuffle=True, pin_memory=pin)
    assert _pin_memory_findings(_context(loader, device)) == []


@pytest.mark.parametrize(
    ("stamps", "workers", "rate"),
    [
        ([1.0, 1.0, 1.5, 2.0, 2.5], 2, 0.5),  # two workers: the first two batches arrive together
        ([1.0, 1.5, 2.0, 2.5], 1, 0.5),
        ([1.0, 1.0], 2, None),  # a two-batch epoch: the workers' pace cannot be seen
    ],
)
def test_the_workers_pace_is_read_after_their_first_round(stamps, workers, rate) -> None:
    from torchdoctor.preflight.loader_timing import _steady_rate

    assert _steady_rate(stamps, workers) == rate
