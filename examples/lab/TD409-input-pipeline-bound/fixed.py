"""A sensor classifier that reads its records from slow storage once, then trains from memory.

Every record still costs a storage round trip (simulated by a 3 ms wait), but the dataset
fetches them all once, up front, and serves the cached tensors: loading a batch is now an
indexing operation and the model spends its time training.
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 32
CLASSES = 5
READ_LATENCY = 0.003  # seconds per record read from network storage


def synthesize(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    prototypes = torch.randn(CLASSES, FEATURES, generator=generator)
    return prototypes[labels] + torch.randn(size, FEATURES, generator=generator), labels


class RemoteRecords(Dataset):
    """Records that live on network storage, fetched once and cached in memory."""

    def __init__(self, size: int = 256) -> None:
        self._store = synthesize(size)
        records = [self.fetch(index) for index in range(size)]
        self._cache = (torch.stack([r[0] for r in records]), torch.stack([r[1] for r in records]))

    def __len__(self) -> int:
        return len(self._store[1])

    def fetch(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(READ_LATENCY)  # the storage round trip
        return self._store[0][index], self._store[1][index]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._cache[0][index], self._cache[1][index]


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    loader = DataLoader(RemoteRecords(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    waiting = computing = 0.0
    for epoch in range(2):
        fetched = time.perf_counter()
        for inputs, labels in loader:
            started = time.perf_counter()
            waiting += started - fetched
            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
            fetched = time.perf_counter()
            computing += fetched - started
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"waiting for data: {waiting / (waiting + computing):.0%} of the time")


if __name__ == "__main__":
    main()
