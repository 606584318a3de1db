"""The batches ``check`` reads come from a replay of the user's loader: same batches, same
order, and nothing of the user's loader advanced or left running."""

from __future__ import annotations

import multiprocessing

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset  # noqa: E402

import torchdoctor  # noqa: E402
from tests.unit.preflight.helpers import class_batch, classifier  # noqa: E402
from torchdoctor.preflight.context import CheckContext  # noqa: E402

pytestmark = pytest.mark.needs_torch

CODES = ["TD401", "TD403", "TD404"]  # probes that read the first batches, nothing else


def _dataset() -> TensorDataset:
    return TensorDataset(*class_batch(size=64))


def _seeded(seed: int = 7) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _loaders(kind: str) -> tuple[DataLoader, DataLoader]:
    """Two identical loaders: one for the check, one that nothing touches."""

    def make() -> DataLoader:
        dataset = _dataset()
        if kind == "sampler":
            return DataLoader(
                dataset, batch_size=16, sampler=RandomSampler(dataset, generator=_seeded())
            )
        if kind == "batch_sampler":  # batch_size is None here, yet batches are collated
            sampler = RandomSampler(dataset, generator=_seeded())
            return DataLoader(dataset, batch_sampler=BatchSampler(sampler, 16, drop_last=False))
        return DataLoader(dataset, batch_size=16, shuffle=True, generator=_seeded())

    return make(), make()


def _same(first, second) -> bool:
    return all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize("kind", ["sampler", "batch_sampler", "loader"])
def test_the_users_generator_is_not_advanced(kind) -> None:
    checked, untouched = _loaders(kind)
    torchdoctor.check(classifier(), checked, nn.CrossEntropyLoss(), select=CODES)
    assert _same(next(iter(checked)), next(iter(untouched)))


@pytest.mark.parametrize("kind", ["sampler", "batch_sampler", "loader"])
def test_the_check_reads_the_batch_the_user_would_get_next(kind) -> None:
    checked, untouched = _loaders(kind)
    ctx = CheckContext(classifier(), checked, nn.CrossEntropyLoss())
    first = ctx.raw_batch
    ctx.close()
    assert _same(first, next(iter(untouched)))


def test_persistent_workers_are_not_left_running() -> None:
    loader = DataLoader(_dataset(), batch_size=16, num_workers=1, persistent_workers=True)
    before = set(multiprocessing.active_children())
    torchdoctor.check(classifier(), loader, nn.CrossEntropyLoss(), select=CODES)
    assert loader._iterator is None
    assert set(multiprocessing.active_children()) <= before


class _OwnIteration(DataLoader):
    """A loader whose class iterates its own way: it cannot be replayed from a clone."""

    def __iter__(self):
        for inputs, targets in super().__iter__():
            yield inputs * 1.0, targets


def test_a_loader_iterated_in_place_is_put_back() -> None:
    dataset = _dataset()
    loader = _OwnIteration(
        dataset,
        batch_size=16,
        shuffle=True,
        generator=_seeded(),
        num_workers=1,
        persistent_workers=True,
    )
    state = loader.generator.get_state()
    before = set(multiprocessing.active_children())
    torchdoctor.check(classifier(), loader, nn.CrossEntropyLoss(), select=CODES)
    assert torch.equal(loader.generator.get_state(), state)
    assert loader._iterator is None
    assert set(multiprocessing.active_children()) <= before


def _persistent_with_own_generator() -> DataLoader:
    dataset = _dataset()
    return DataLoader(
        dataset,
        batch_size=16,
        sampler=RandomSampler(dataset, generator=_seeded()),
        num_workers=2,
        persistent_workers=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize("mid_training", [False, True], ids=["fresh", "workers-running"])
def test_a_full_check_leaves_a_persistent_loader_and_its_sampler_as_found(mid_training) -> None:
    """Every probe (the loader timings and worker draws included) reads clones: the
    sampler's generator is not advanced, the user's running workers are neither ended
    nor joined by others, and the next epoch is the one an untouched twin gives."""
    checked, twin = _persistent_with_own_generator(), _persistent_with_own_generator()
    if mid_training:
        for loader in (checked, twin):
            list(loader)  # one epoch: the persistent workers stay up
    iterator, state = checked._iterator, checked.sampler.generator.get_state()
    before = set(multiprocessing.active_children())
    model = classifier()
    try:
        report = torchdoctor.check(
            model, checked, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters())
        )
        assert not report.by_code("TD001")
        assert torch.equal(checked.sampler.generator.get_state(), state)
        assert checked._iterator is iterator
        assert set(multiprocessing.active_children()) == before
        for ours, theirs in zip(checked, twin, strict=True):
            assert _same(ours, theirs)
    finally:  # end this test's own workers, so no later test sees them
        for loader in (checked, twin):
            if loader._iterator is not None:
                loader._iterator._shutdown_workers()
