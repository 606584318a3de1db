"""A small image classifier with five classic, silent training bugs.

torchdoctor's demo runs on this file; nothing here crashes, and the loss even goes down.
Each bug is marked ``BUG`` with what it costs; `torchdoctor demo` finds them all.

Run it yourself:
    torchdoctor lint  buggy_train.py
    torchdoctor check buggy_train.py:make
    torchdoctor run   buggy_train.py --max-steps 40
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 10


class SmallNet(nn.Module):
    """A two-layer convolutional classifier for 1x16x16 images."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.dropout = nn.Dropout(0.3)
        self.head = nn.Linear(32 * 4 * 4, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).flatten(1)
        return self.head(self.dropout(x))


def synthetic_images(n: int, seed: int) -> TensorDataset:
    """Images whose class is written in their mean brightness, as raw 0-255 pixels."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=generator)
    pixels = torch.rand(n, 1, 16, 16, generator=generator) * 128 + labels.view(-1, 1, 1, 1) * 12
    return TensorDataset(pixels, labels)  # BUG: 0-255 pixels, never normalised


def make():
    """What `torchdoctor check` takes: model, data, loss function, optimizer."""
    torch.manual_seed(0)
    model = SmallNet()
    loader = DataLoader(synthetic_images(512, seed=1), batch_size=32, shuffle=True)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.05)  # BUG: only the head trains
    return model, loader, criterion, optimizer


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    """Accuracy on a loader."""
    correct = total = 0
    with torch.no_grad():  # BUG: no model.eval(): dropout and batch statistics stay on
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
            total += len(labels)
    return correct / total


def main(epochs: int = 3) -> None:
    """Train for a few epochs and print the validation accuracy."""
    model, loader, criterion, optimizer = make()
    val_loader = DataLoader(synthetic_images(256, seed=2), batch_size=64)
    for epoch in range(epochs):
        model.train()
        running_loss = 0.0
        for images, labels in loader:
            logits = model(images)
            loss = criterion(torch.softmax(logits, dim=1), labels)  # BUG: softmax twice
            loss.backward()
            optimizer.step()  # BUG: gradients are never cleared
            running_loss += loss  # BUG: keeps every step's graph alive
        accuracy = evaluate(model, val_loader)
        print(f"epoch {epoch}: loss {running_loss.item() / len(loader):.3f}, "
              f"val accuracy {accuracy:.2%}")


if __name__ == "__main__":
    main()
