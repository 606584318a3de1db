"""Training and validation split into functions, the way most tutorials structure it.

The caller switches modes: `model.eval()` before `evaluate()` and `model.train()` again
before the next training epoch. `evaluate()` is decorated with `@torch.no_grad()`. The
model has BatchNorm and Dropout, so the mode matters.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


class ConvNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(16, classes))

    def forward(self, x):
        return self.head(self.features(x))


def make_dataset(size=300):
    generator = torch.Generator().manual_seed(9)
    labels = torch.randint(0, 3, (size,), generator=generator)
    images = torch.randn(size, 1, 10, 10, generator=generator) * 0.5
    images[:, :, :, :3] += (labels == 0).float().view(-1, 1, 1, 1)
    images[:, :, :, -3:] += (labels == 1).float().view(-1, 1, 1, 1)
    return TensorDataset(images, labels)


def train_one_epoch(model, loader, criterion, optimizer):
    total, count = 0.0, 0
    for images, labels in loader:
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        total += loss.item() * labels.size(0)
        count += labels.size(0)
    return total / count


@torch.no_grad()
def evaluate(model, loader, criterion):
    total, correct, count = 0.0, 0, 0
    for images, labels in loader:
        logits = model(images)
        total += criterion(logits, labels).item() * labels.size(0)
        correct += (logits.argmax(dim=1) == labels).sum().item()
        count += labels.size(0)
    return total / count, correct / count


def make():
    torch.manual_seed(0)
    model = ConvNet()
    images, labels = make_dataset(64).tensors
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, (images, labels), nn.CrossEntropyLoss(), optimizer


def main():
    torch.manual_seed(0)
    train_set, val_set = random_split(make_dataset(), [240, 60], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)
    model = ConvNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    for epoch in range(3):
        model.train()
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer)
        model.eval()
        val_loss, accuracy = evaluate(model, val_loader, criterion)
        print(f"epoch {epoch}: train {train_loss:.3f} val {val_loss:.3f} acc {accuracy:.2%}")


if __name__ == "__main__":
    main()
