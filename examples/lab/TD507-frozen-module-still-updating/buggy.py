"""Fine-tuning a head on a frozen convolutional backbone that is not really frozen.

The backbone's parameters are frozen with `requires_grad_(False)`, but `model.train()` at
every epoch puts its BatchNorm layers back in training mode: they keep updating their
running statistics from the new data. The second style freezes inside an overridden
`train()` that sets the flags but forwards the mode to the backbone as well.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_backbone() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())


def make_loader() -> DataLoader:
    generator = torch.Generator().manual_seed(3)
    images = torch.randn(192, 3, 8, 8, generator=generator) * 2 + 1
    return DataLoader(TensorDataset(images, torch.randint(0, 4, (192,), generator=generator)),
                      batch_size=32, shuffle=True)


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = make_backbone()  # expect[run]: TD507
        self.head = nn.Linear(8, 4)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images))


class FreezingClassifier(nn.Module):
    """Freezes its backbone whenever it is put in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.features = make_backbone()  # expect[run]: TD507
        self.head = nn.Linear(8, 4)

    def train(self, mode: bool = True) -> "FreezingClassifier":
        super().train(mode)
        self.features.requires_grad_(False)
        return self

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images))


def fit(model: nn.Module, epochs: int = 3) -> float:
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.05)
    loss = torch.zeros(())
    for _ in range(epochs):
        model.train()
        for images, labels in make_loader():
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    model = Classifier()
    model.backbone.requires_grad_(False)
    print(f"flags only: {fit(model):.3f}  overridden train(): {fit(FreezingClassifier()):.3f}")


if __name__ == "__main__":
    main()
