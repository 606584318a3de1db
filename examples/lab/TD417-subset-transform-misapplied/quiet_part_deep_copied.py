"""A split helper that deep-copies the validation part before giving it its transform.

`random_split` returns two Subsets of one dataset. The helper replaces the validation
part with `copy.deepcopy(val)`, which copies the Subset's dataset too, and only then sets
`val.dataset.transform`: the training part keeps its augmentation.
"""

import copy

import torch
from torch.utils.data import Dataset, random_split


class Points(Dataset):
    def __init__(self, transform=None) -> None:
        self.data = torch.arange(20, dtype=torch.float32).unsqueeze(1)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> torch.Tensor:
        x = self.data[index]
        return self.transform(x) if self.transform else x


def train_val_split(dataset: Dataset, rate: float, val_transform=None):
    train, val = random_split(dataset, [1 - rate, rate], generator=torch.Generator().manual_seed(0))
    val = copy.deepcopy(val)
    val.dataset.transform = val_transform
    return train, val


def main() -> None:
    def augment(x: torch.Tensor) -> torch.Tensor:
        return x + 100.0

    train, val = train_val_split(Points(transform=augment), 0.25)
    assert all(sample.item() >= 100 for sample in train)  # still augmented
    assert all(sample.item() < 100 for sample in val)
    print(len(train), len(val))


if __name__ == "__main__":
    main()
