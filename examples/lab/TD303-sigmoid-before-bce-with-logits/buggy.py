"""A multi-label tagger whose forward ends in sigmoid, trained with BCEWithLogitsLoss.

BCEWithLogitsLoss applies sigmoid itself, so predictions are squeezed into (0.5, 0.73):
the loss cannot fall below -ln(0.73) = 0.31 for a positive tag or ln(2) = 0.69 for a
negative one, and the model barely learns.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, TAGS = 32, 8


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, TAGS))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.body(features))


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    mixing = torch.randn(FEATURES, TAGS, generator=generator)
    tags = (features @ mixing > 0).float()
    return TensorDataset(features, tags)


def make():
    torch.manual_seed(0)
    model = Tagger()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.BCEWithLogitsLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, tags in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), tags)  # expect[lint]: TD303
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


LOSS = nn.BCEWithLogitsLoss()


def compute_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loss helper: the model's output reaches the loss through a parameter."""
    return LOSS(outputs, targets)


def train_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer) -> None:
    for features, tags in loader:
        optimizer.zero_grad()
        loss = compute_loss(model(features), tags)  # expect[lint]: TD303
        loss.backward()
        optimizer.step()


def run_step(model: nn.Module, loss_fn: nn.Module, features: torch.Tensor,
             tags: torch.Tensor) -> torch.Tensor:
    return loss_fn(model(features), tags)  # expect[lint]: TD303


def train_with_helpers() -> None:
    """The same training, split into a loss helper, an epoch function and a step."""
    model = Tagger()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_epoch(model, loader, optimizer)
    features, tags = next(iter(loader))
    run_step(model, nn.BCEWithLogitsLoss(), features, tags).backward()


if __name__ == "__main__":
    main()
