"""A small image classifier fed pixels scaled to [0, 1] and standardised."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 4


class ShapeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, CLASSES)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).flatten(1))


def load_images(size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """8-bit grey images, as decoded from PNG files: integers 0-255."""
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    brightness = 40 + 50 * labels.view(-1, 1, 1, 1)
    noise = torch.randint(0, 60, (size, 1, 12, 12), generator=generator)
    return (brightness + noise).clamp(0, 255).to(torch.uint8), labels


def make():
    torch.manual_seed(0)
    pixels, labels = load_images()
    images = pixels.float() / 255
    images = (images - images.mean()) / images.std()  # statistics of the training set
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    model = ShapeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
