"""A trainer that splits its dataset with `Subset` and sets each part's transform on the
part itself.

`Subset` has no transform: `self.val_set.transform = ...` only adds an attribute nothing
reads, and the validation part keeps returning samples made by the dataset's own training
augmentation, so every validation score is measured on randomly flipped inputs.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset


class Images(Dataset):
    def __init__(self, size: int, transform=None) -> None:
        generator = torch.Generator().manual_seed(0)
        self.images = torch.rand(size, 1, 8, 8, generator=generator)
        self.labels = (self.images[:, 0, :, :4].mean(dim=(1, 2)) > 0.5).long()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[index]


def random_flip(image: torch.Tensor) -> torch.Tensor:
    return image.flip(-1) if torch.rand(()) < 0.5 else image


class Trainer:
    def __init__(self, dataset: Images) -> None:
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(1)).tolist()
        self.train_set = Subset(dataset, order[:448])
        self.val_set = Subset(dataset, order[448:])
        self.val_set.transform = None  # expect: TD417
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(64, 2))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.5)

    def fit(self, epochs: int = 3) -> None:
        for epoch in range(epochs):
            self.model.train()
            for x, y in DataLoader(self.train_set, batch_size=32, shuffle=True):
                self.optimizer.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                self.optimizer.step()
            print(f"epoch {epoch}: validation accuracy {self.validate():.3f}")

    @torch.no_grad()
    def validate(self) -> float:
        self.model.eval()
        loader = DataLoader(self.val_set, batch_size=64)
        correct = sum((self.model(x).argmax(1) == y).sum().item() for x, y in loader)
        return correct / len(self.val_set)


if __name__ == "__main__":
    torch.manual_seed(0)
    Trainer(Images(512, transform=random_flip)).fit()
