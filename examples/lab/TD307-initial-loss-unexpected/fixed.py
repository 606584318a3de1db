"""A classifier with PyTorch's default initialisation: its first loss is close to ln(10) = 2.3."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, CLASSES),
        )
        # PyTorch's default init scales each layer's weights by 1/sqrt(fan_in).

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features)


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    centres = torch.randn(CLASSES, 64, generator=generator)
    features = centres[labels] + torch.randn(size, 64, generator=generator)
    return TensorDataset(features, labels)


def make():
    torch.manual_seed(0)
    model = Classifier()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
