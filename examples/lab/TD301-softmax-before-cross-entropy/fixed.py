"""A digit-style classifier that returns raw logits to CrossEntropyLoss.

Softmax belongs to prediction time (`model(x).softmax(1)`), not to the training loss.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, CLASSES))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = self.body(images.flatten(1))
        return logits  # CrossEntropyLoss applies log_softmax itself


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    prototypes = torch.randn(CLASSES, 64, generator=generator)
    images = prototypes[labels] + 0.5 * torch.randn(size, 64, generator=generator)
    return TensorDataset(images.view(size, 1, 8, 8), labels)


def make():
    torch.manual_seed(0)
    model = Classifier()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
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


LOSS = nn.CrossEntropyLoss()


def compute_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loss helper: the model's output reaches the loss through a parameter."""
    return LOSS(outputs, targets)


def train_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer) -> None:
    for images, labels in loader:
        optimizer.zero_grad()
        loss = compute_loss(model(images), labels)
        loss.backward()
        optimizer.step()


def run_step(model: nn.Module, loss_fn: nn.Module, images: torch.Tensor,
             labels: torch.Tensor) -> torch.Tensor:
    return loss_fn(model(images), labels)


def train_with_helpers() -> None:
    """The same training, split into a loss helper, an epoch function and a step."""
    model = Classifier()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_epoch(model, loader, optimizer)
    images, labels = next(iter(loader))
    run_step(model, nn.CrossEntropyLoss(), images, labels).backward()


if __name__ == "__main__":
    main()
