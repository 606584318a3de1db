"""The split is made once, on indices, and each part takes them from a dataset built with
its own transform: training keeps its noise augmentation, validation sees clean inputs."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, random_split


class Points(Dataset):
    def __init__(self, size: int, transform=None) -> None:
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.randn(size, 8, generator=generator)
        self.targets = (self.inputs.sum(dim=1) > 0).long()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.inputs[index]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.targets[index]


def add_noise(x: torch.Tensor) -> torch.Tensor:
    return x + 0.3 * torch.randn_like(x)


def identity(x: torch.Tensor) -> torch.Tensor:
    return x


def main() -> None:
    torch.manual_seed(0)
    train_part, val_part = random_split(range(1024), [896, 128], generator=torch.Generator().manual_seed(1))
    train_set = Subset(Points(1024, transform=add_noise), train_part.indices)
    val_set = Subset(Points(1024, transform=identity), val_part.indices)
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        for x, y in DataLoader(train_set, batch_size=64, shuffle=True):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(x).argmax(1) == y).sum().item() for x, y in DataLoader(val_set, batch_size=128))
        print(f"epoch {epoch}: validation accuracy {correct / len(val_set):.3f}")


if __name__ == "__main__":
    main()
