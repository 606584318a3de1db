"""Loaders rebuilt only once the previous one's iterator has run out.

Step-based training often reads batches with `next()` and, when the iterator is used up,
builds a new loader: in an `except StopIteration:` handler, after `next(it, None)` comes
back empty, or in an endless generator (`yield from` a new loader, or a `for` over
it that yields each batch). Each loader is read whole, one pass over the data,
so this costs what reusing one loader costs (its workers restart at each new pass too):
information, with `persistent_workers=True` on a loader built once as the improvement.
"""

from collections.abc import Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(size: int = 64) -> TensorDataset:
    inputs = torch.randn(size, 6)
    return TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))


def batches(dataset: TensorDataset) -> Iterator[list[torch.Tensor]]:
    """An endless stream of batches for a step-counted loop."""
    loader = iter(DataLoader(dataset, batch_size=16, shuffle=True, num_workers=1))
    while True:
        try:
            yield next(loader)
        except StopIteration:
            loader = DataLoader(dataset, batch_size=16, num_workers=1)  # expect: TD406
            loader = iter(loader)
            yield next(loader)


def endless(dataset: TensorDataset) -> Iterator[list[torch.Tensor]]:
    while True:
        yield from DataLoader(dataset, batch_size=16, shuffle=True, num_workers=1)  # expect: TD406


def endless_by_hand(dataset: TensorDataset) -> Iterator[list[torch.Tensor]]:
    while True:
        for batch in DataLoader(dataset, batch_size=16, num_workers=1):  # expect: TD406
            yield [tensor.float() for tensor in batch]


def fit_with_sentinel(dataset: TensorDataset, steps: int = 10) -> float:
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    it = iter(DataLoader(dataset, batch_size=16, num_workers=1))
    for _ in range(steps):
        batch = next(it, None)
        if batch is None:
            loader = DataLoader(dataset, batch_size=16, num_workers=1)  # expect: TD406
            it = iter(loader)
            batch = next(it)
        inputs, targets = batch
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


def fit_stream(stream: Iterator[list[torch.Tensor]], steps: int = 10) -> float:
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        inputs, targets = next(stream)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    dataset = make_dataset()
    print(
        f"handler: {fit_stream(batches(dataset)):.4f}  "
        f"endless: {fit_stream(endless(dataset)):.4f}  "
        f"by hand: {fit_stream(endless_by_hand(dataset)):.4f}  "
        f"sentinel: {fit_with_sentinel(dataset):.4f}"
    )


if __name__ == "__main__":
    main()
