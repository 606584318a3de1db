"""Fine-tuning with a new head that a freezing step meant for the backbone froze too.

Each shape attaches a fresh head first and freezes afterwards, keeping only the
normalisation layers trainable: a by-name filter in a plain loop, an `isinstance` filter
in a trainer's helper method, and a `requires_grad_` pass in a start-of-training callback.
The fresh head stays a fixed random projection, and accuracy stays near chance.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES = 24, 6


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 64), nn.LayerNorm(64), nn.ReLU())
        self.norm = nn.LayerNorm(64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(self.body(x)))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.classifier = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.stem(x).mean(dim=(2, 3)))


def make_loader() -> DataLoader:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1024, FEATURES, generator=generator)
    y = (x[:, :CLASSES] * 3).argmax(dim=1)
    return DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


def make_images() -> DataLoader:
    generator = torch.Generator().manual_seed(2)
    y = torch.randint(0, CLASSES, (256,), generator=generator)
    x = torch.randn(256, 3, 8, 8, generator=generator) + y.view(-1, 1, 1, 1) * 0.3
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)


def make() -> tuple:
    torch.manual_seed(0)
    model = Net()
    model.fc = nn.Linear(64, CLASSES)  # a new head for this task
    for name, param in model.named_parameters():
        if "norm" not in name:
            param.requires_grad = False  # expect[check]: TD226
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, make_loader(), nn.CrossEntropyLoss(), optimizer


class Trainer:
    """Steps live in helpers; the freezing helper keeps only normalisation trainable."""

    def __init__(self) -> None:
        self.model = ConvNet()
        self.model.classifier = nn.Linear(16, CLASSES)
        self._freeze_all_but_norms()
        self.optimizer = torch.optim.Adam(
            [p for p in self.model.parameters() if p.requires_grad], lr=1e-2
        )

    def _freeze_all_but_norms(self) -> None:
        for module in self.model.modules():
            keep = isinstance(module, (nn.BatchNorm2d, nn.LayerNorm))
            for param in module.parameters(recurse=False):
                param.requires_grad = keep

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, loader: DataLoader, epochs: int) -> float:
        loss = 0.0
        for _ in range(epochs):
            for x, y in loader:
                loss = self._step(x, y)
        return loss


def freeze_backbone(model: nn.Module) -> None:
    """A start-of-training callback: freeze everything, then re-enable the norms."""
    model.requires_grad_(False)
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.requires_grad_(True)


def fit_with_callbacks(model: nn.Module, loader: DataLoader, on_start: list) -> float:
    for callback in on_start:
        callback(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def closure_for(x: torch.Tensor, y: torch.Tensor) -> Callable[[], torch.Tensor]:
        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            targets = F.one_hot(y, CLASSES).float()
            loss = F.binary_cross_entropy_with_logits(model(x), targets)
            loss.backward()
            return loss

        return closure

    loss = torch.tensor(0.0)
    for x, y in loader:
        loss = optimizer.step(closure_for(x, y))
    return loss.item()


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {criterion(model(x), y).item():.3f}")
    print(f"trainer: loss {Trainer().fit(make_images(), 2):.3f}")
    head = Net()
    head.fc = nn.Linear(64, CLASSES)
    print(f"callbacks: loss {fit_with_callbacks(head, make_loader(), [freeze_backbone]):.3f}")


if __name__ == "__main__":
    main()
