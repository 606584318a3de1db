"""A sampler that can never draw part of its loader's dataset (TD414), judged from the
sampler's own arguments at both depths that see live objects."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import (  # noqa: E402
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
)
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

import torchdoctor  # noqa: E402
from torchdoctor.runtime.sampler_reach import sampler_reach  # noqa: E402

SIZE = 96
CLASSES = 3


def dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(SIZE, 4, generator=generator),
        torch.randint(0, CLASSES, (SIZE,), generator=generator),
    )


def class_weights(data: TensorDataset) -> Any:
    return 1.0 / torch.bincount(data.tensors[1], minlength=CLASSES).double()


class Every:
    def __iter__(self) -> Any:
        return iter(range(SIZE))


def reach_of(loader: DataLoader) -> Any:
    return sampler_reach(
        loader.dataset, loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    )


# --- what the sampler's arguments prove ------------------------------------------------------


def test_one_weight_per_class_reaches_as_many_examples_as_classes() -> None:
    data = dataset()
    reach = reach_of(DataLoader(data, 8, sampler=WeightedRandomSampler(class_weights(data), SIZE)))
    assert (reach.reachable, reach.size, reach.source) == (CLASSES, SIZE, "weights")


def test_a_sampler_built_over_a_split_reads_the_wrong_examples_of_the_whole() -> None:
    data = dataset()
    train = Subset(data, range(32, SIZE))
    for sampler in (RandomSampler(train), SequentialSampler(train)):
        reach = reach_of(DataLoader(data, 8, sampler=sampler))
        assert (reach.reachable, reach.source) == (SIZE - 32, "dataset")


def test_a_list_of_indices_given_as_a_data_source_is_read_as_its_length() -> None:
    data = dataset()  # SequentialSampler(indices) yields 0..len-1, not the indices
    assert (
        reach_of(DataLoader(data, 8, sampler=SequentialSampler(list(range(50, 90))))).reachable
        == 40
    )


def test_a_distributed_sampler_over_another_split_and_a_users_batch_sampler() -> None:
    data = dataset()
    shard = DistributedSampler(Subset(data, range(48)), num_replicas=2, rank=0)
    assert reach_of(DataLoader(data, 8, sampler=shard)).reachable == 48
    batches = BatchSampler(RandomSampler(Subset(data, range(10))), 4, drop_last=False)
    assert reach_of(DataLoader(data, batch_sampler=batches)).reachable == 10


@pytest.mark.parametrize(
    "make",
    [
        lambda d: RandomSampler(d),
        lambda d: DistributedSampler(d, num_replicas=2, rank=1),
        lambda d: SubsetRandomSampler(range(10)),  # a subset chosen on purpose
        lambda d: WeightedRandomSampler(torch.ones(SIZE), 10),  # fewer draws, every index
        lambda d: WeightedRandomSampler(torch.cat([torch.zeros(50), torch.ones(46)]), SIZE),
        lambda d: RandomSampler(TensorDataset(torch.zeros(SIZE))),  # same length: unknown
        lambda d: RandomSampler(d, num_samples=10),
        lambda d: Every(),  # a sampler we do not know, without a length
    ],
)
def test_samplers_that_can_reach_every_index_or_chose_a_subset_are_quiet(make: Any) -> None:
    data = dataset()
    assert reach_of(DataLoader(data, 8, sampler=make(data))) is None


def test_streams_are_not_judged() -> None:
    class Stream(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            return iter(range(4))

    assert sampler_reach(Stream(), RandomSampler(range(2))) is None


# --- at run time, however the loop reads the loader ------------------------------------------


def model_and_optimizer() -> tuple[nn.Module, Any]:
    torch.manual_seed(0)
    model = nn.Linear(4, CLASSES)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def step(model: nn.Module, optimizer: Any, batch: Any) -> None:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(batch[0]), batch[1]).backward()
    optimizer.step()


class Trainer:
    def __init__(self, make_loader: Any) -> None:
        self.make_loader = make_loader
        self.model, self.optimizer = model_and_optimizer()

    def _epoch(self) -> None:
        for batch in self.make_loader():  # a new loader every epoch
            step(self.model, self.optimizer, batch)

    def fit(self, epochs: int) -> None:
        for _ in range(epochs):
            self._epoch()


def train(shape: str, make_loader: Any) -> torchdoctor.Report:
    with torchdoctor.watch() as session:
        if shape == "trainer":
            Trainer(make_loader).fit(3)
        elif shape == "callback":  # a framework that pulls batches and calls back
            model, optimizer = model_and_optimizer()
            on_batch = lambda batch: step(model, optimizer, batch)  # noqa: E731
            iterator = iter(make_loader())
            for _ in range(6):
                on_batch(next(iterator))
        else:
            model, optimizer = model_and_optimizer()
            loader = make_loader()
            for _ in range(2):
                for batch in loader:
                    step(model, optimizer, batch)
    return session.report


SHAPES = ("loop", "trainer", "callback")


@pytest.mark.parametrize("shape", SHAPES)
def test_class_weights_are_found_once_whatever_the_loop(shape: str) -> None:
    data = dataset()
    weights = class_weights(data)
    report = train(shape, lambda: DataLoader(data, 8, sampler=WeightedRandomSampler(weights, SIZE)))
    [found] = report.by_code("TD414")
    assert found.evidence["reachable"] == CLASSES and found.location.line is not None


@pytest.mark.parametrize("shape", SHAPES)
def test_per_example_weights_and_split_loaders_are_quiet(shape: str) -> None:
    data = dataset()
    weights = class_weights(data)[data.tensors[1]]
    train_split = Subset(data, range(32, SIZE))
    assert (
        "TD414"
        not in train(
            shape, lambda: DataLoader(data, 8, sampler=WeightedRandomSampler(weights, SIZE))
        ).codes()
    )
    assert "TD414" not in train(shape, lambda: DataLoader(train_split, 8, shuffle=True)).codes()
    assert (
        "TD414"
        not in train(
            shape, lambda: DataLoader(data, 8, sampler=SubsetRandomSampler(range(32, SIZE)))
        ).codes()
    )
