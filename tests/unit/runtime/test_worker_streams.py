"""TD410 at run time: DataLoader workers that draw one random stream, judged when a loader
with workers starts iterating, whatever holds the generator or arranges the loop; quiet
on the per-worker seeding torch does itself (torch, ``random``, numpy's global generator)
and on generators reseeded per worker. The watched run's output and random states are
unchanged by the judging."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]
torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from torch.utils.data import DataLoader, Dataset, IterableDataset  # noqa: E402

import torchdoctor  # noqa: E402


class Jitter(Dataset):
    """Sixteen samples, each the index plus a draw of ``draw(self)``."""

    def __init__(self, draw: Callable[[Any], float], say: bool = False, **generators: Any) -> None:
        self.draw, self.say = draw, say
        vars(self).update(generators)

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.say:
            print(f"loading {index}")
        return torch.tensor([index + self.draw(self)], dtype=torch.float64)


class Wrapped(Dataset):
    """A wrapper (like ``Subset``) over a dataset that holds the generator."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.dataset[index]


def own_numpy(ds: Any) -> float:
    return float(ds.rng.uniform())


def own_stdlib(ds: Any) -> float:
    return ds.stdlib.random()


def global_numpy(ds: Any) -> float:
    return float(np.random.uniform())  # torch reseeds numpy's global generator per worker


def global_torch(ds: Any) -> float:
    return float(torch.rand(()))


def constant(ds: Any) -> float:
    return 0.0


def seed_all_alike(worker_id: int) -> None:
    np.random.seed(0)


def reseed_own(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.RandomState(info.seed % 2**32)


def epoch(dataset: Dataset, **options: Any) -> set[str]:
    with torchdoctor.watch() as session:
        for _ in DataLoader(dataset, batch_size=4, num_workers=2, **options):
            pass
    return session.report.codes()


class Trainer:
    """The loader is built and iterated in helper methods, and the workers persist."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def _loader(self) -> DataLoader:
        return DataLoader(self.dataset, batch_size=4, num_workers=2, persistent_workers=True)

    def fit(self, epochs: int) -> None:
        loader = self._loader()
        for _ in range(epochs):
            for _batch in loader:
                pass


def test_dataset_holding_a_numpy_generator_is_flagged() -> None:
    assert "TD410" in epoch(Jitter(own_numpy, rng=np.random.RandomState(0)))


def test_wrapped_dataset_with_a_stdlib_generator_in_a_trainer_is_flagged() -> None:
    with torchdoctor.watch() as session:
        Trainer(Wrapped(Jitter(own_stdlib, stdlib=random.Random(0)))).fit(2)
    (hit,) = [f for f in session.report.findings if f.code == "TD410"]
    assert hit.evidence["cause"] == "Jitter.stdlib"


def test_worker_init_fn_seeding_every_worker_alike_is_flagged() -> None:
    assert "TD410" in epoch(Jitter(global_numpy), worker_init_fn=seed_all_alike)


@pytest.mark.parametrize(
    "draw", [global_numpy, global_torch, constant], ids=["numpy-global", "torch", "constant"]
)
def test_streams_torch_seeds_per_worker_are_quiet(draw: Callable[[Any], float]) -> None:
    assert "TD410" not in epoch(Jitter(draw))


def test_generator_reseeded_per_worker_is_quiet() -> None:
    assert "TD410" not in epoch(
        Jitter(own_numpy, rng=np.random.RandomState(0)), worker_init_fn=reseed_own
    )


def test_loader_without_workers_is_not_judged() -> None:
    with torchdoctor.watch() as session:
        for _ in DataLoader(Jitter(own_numpy, rng=np.random.RandomState(0)), batch_size=4):
            pass
    assert "TD410" not in session.report.codes()


class Stream(IterableDataset):
    def __init__(self) -> None:
        self.rng = np.random.RandomState(0)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([torch.tensor(self.rng.uniform()) for _ in range(4)])


def test_iterable_dataset_is_not_judged() -> None:
    assert "TD410" not in epoch(Stream())


def test_judging_adds_no_output_and_keeps_random_states(capfd: pytest.CaptureFixture[str]) -> None:
    generator = torch.Generator().manual_seed(3)
    before = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    with torchdoctor.watch() as session:
        for _ in DataLoader(
            Jitter(own_numpy, say=True, rng=np.random.RandomState(0)),
            batch_size=4,
            num_workers=2,
            generator=generator,
        ):
            pass
    after = torch.get_rng_state(), random.getstate(), np.random.get_state()[1]
    assert "TD410" in session.report.codes()
    assert capfd.readouterr().out.count("loading") == 16  # the user's 16 samples only
    assert torch.equal(before[0], after[0]) and before[1] == after[1]
    assert (before[2] == after[2]).all()
