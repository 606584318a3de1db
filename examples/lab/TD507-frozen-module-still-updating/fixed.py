"""The frozen backbone is kept in eval mode whenever the model is put in training mode."""

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
        self.backbone = make_backbone()
        self.head = nn.Linear(8, 4)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images))


class FreezingClassifier(nn.Module):
    """Freezes its backbone, flags and mode, whenever it is put in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.features = make_backbone()
        self.head = nn.Linear(8, 4)

    def train(self, mode: bool = True) -> "FreezingClassifier":
        super().train(mode)
        self.features.requires_grad_(False)
        self.features.eval()
        return self

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images))


def fit(model: nn.Module, epochs: int = 3, frozen: nn.Module | None = None) -> float:
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.05)
    loss = torch.zeros(())
    for _ in range(epochs):
        model.train()
        if frozen is not None:
            frozen.eval()
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
    flags_and_mode = fit(model, frozen=model.backbone)
    print(f"flags and mode: {flags_and_mode:.3f}  overridden train(): "
          f"{fit(FreezingClassifier()):.3f}")


if __name__ == "__main__":
    main()
