"""A dataset that replaces a sample its mapper rejects with a random other one.

As detectron2's ``MapDataset`` does, the dataset keeps ``random.Random(42)`` and, in
``__getitem__``, maps the requested index; only when the mapper returns ``None`` (a
corrupt or empty record) does it draw another index from the generator and try again.
Every augmentation comes from ``torch``, which PyTorch seeds per worker, so the workers
draw different flips and noise. Workers sharing the fallback generator at most pick the
same replacement for a broken record, which changes no augmentation.
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 8


class Records(Dataset):
    """Feature vectors, every seventh one unreadable (``None``)."""

    def __init__(self, size: int = 128) -> None:
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.randn(size, FEATURES, generator=generator)
        self.targets = self.inputs.sum(dim=1, keepdim=True)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        if index % 7 == 0:
            return None
        return self.inputs[index], self.targets[index]


def augment(records: Records, index: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Noise from torch's generator, which PyTorch seeds in each worker."""
    record = records[index]
    if record is None:
        return None
    inputs, target = record
    return inputs + 0.05 * torch.randn(FEATURES), target


class MappedRecords(Dataset):
    """Maps ``augment`` over the records; a rejected record is replaced by a random one."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self._rng = random.Random(42)
        self._fallback_candidates = set(range(len(records)))

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        current = int(index)
        while True:
            data = augment(self.records, current)
            if data is not None:
                self._fallback_candidates.add(current)
                return data
            self._fallback_candidates.discard(current)
            current = self._rng.choice(sorted(self._fallback_candidates))


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(MappedRecords(Records()), batch_size=16, shuffle=True, num_workers=2)
    for epoch in range(2):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
