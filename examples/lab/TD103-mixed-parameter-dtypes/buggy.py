"""An image classifier whose backbone was cast to bfloat16 "to save memory", head in float32.

The optimizer now updates the backbone in bfloat16, which keeps 8 significant bits: an
update smaller than 1/256 of a weight rounds away to nothing, so with lr=1e-3 most of
the backbone's weights never change while the float32 head trains normally.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        ).to(torch.bfloat16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.backbone(images.to(torch.bfloat16)).flatten(1)
        return self.head(features.float())


def make_dataset(size: int = 256) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    colours = torch.randn(CLASSES, 3, 1, 1, generator=generator)
    images = colours[labels] + 0.5 * torch.randn(size, 3, 8, 8, generator=generator)
    return TensorDataset(images, labels)


def make():
    torch.manual_seed(0)
    model = Classifier()
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(2):
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
