"""A data module that gives every part of its split the same input transform.

`random_split` returns two views of one dataset, so a transform set through one part's
`.dataset` reaches the other too. Here both parts are given the same deterministic
transform (no training-only augmentation), so whichever part sets it, neither gets a
transform meant for the other.
"""

import torch
from torch.utils.data import Dataset, random_split


class Lines(Dataset):
    def __init__(self, n: int) -> None:
        self.images = torch.rand(n, 1, 8, 32)
        self.transforms = None

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = self.images[index]
        return self.transforms(image) if self.transforms is not None else image


class LineData:
    def __init__(self, n: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.train_set, self.val_set = random_split(Lines(n), [0.8, 0.2], generator=generator)

    def setup(self) -> None:
        def transforms(image: torch.Tensor) -> torch.Tensor:
            return (image - 0.5) / 0.5

        self.train_set.dataset.transforms = transforms
        self.val_set.dataset.transforms = transforms


def main() -> None:
    data = LineData(20)
    data.setup()
    print("train sample range:", data.train_set[0].min().item(), data.train_set[0].max().item())
    print("validation sample range:", data.val_set[0].min().item(), data.val_set[0].max().item())


if __name__ == "__main__":
    main()
