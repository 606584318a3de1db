"""Three correct ways to give the parts of a split their own transforms.

The validation part of a `random_split` is handed a copy of the dataset before its
transform changes (`val_set.dataset = copy.deepcopy(full)`); a second split keeps one
part only; and a wrapper dataset applies each part's transform on top of its `Subset`.
"""

import copy

import torch
from torch.utils.data import Dataset, Subset, random_split


class Points(Dataset):
    def __init__(self, size: int, transform=None) -> None:
        self.inputs = torch.randn(size, 8)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int) -> torch.Tensor:
        x = self.inputs[index]
        return self.transform(x) if self.transform is not None else x


class Transformed(Dataset):
    def __init__(self, subset: Subset, transform) -> None:
        self.subset = subset
        self.transform = transform

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.transform(self.subset[index])


def add_noise(x: torch.Tensor) -> torch.Tensor:
    return x + 0.1 * torch.randn_like(x)


def copied(full: Points) -> tuple[Subset, Subset]:
    train_set, val_set = random_split(full, [0.8, 0.2])
    val_set.dataset = copy.deepcopy(full)
    val_set.dataset.transform = None
    return train_set, val_set


def one_part_kept(full: Points) -> Subset:
    small, _ = random_split(full, [0.1, 0.9])
    small.dataset.transform = add_noise
    return small


def wrapped(full: Points) -> tuple[Dataset, Dataset]:
    train_part, val_part = random_split(full, [0.8, 0.2])
    train_set = Transformed(train_part, add_noise)
    val_set = Transformed(val_part, lambda x: x)
    train_set.transform = add_noise
    return train_set, val_set


if __name__ == "__main__":
    torch.manual_seed(0)
    print([len(part) for part in copied(Points(100, transform=add_noise))])
    print(len(one_part_kept(Points(100))))
    print([len(part) for part in wrapped(Points(100))])
