"""A sensor-activity classifier whose raw scores go through log_softmax before NLLLoss."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CHANNELS, STEPS, ACTIVITIES = 3, 32, 5


class ActivityNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(CHANNELS, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1)
        )
        self.head = nn.Linear(16, ACTIVITIES)

    def forward(self, signals: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.head(self.conv(signals).flatten(1)), dim=1)


def make_dataset(size: int = 384) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, ACTIVITIES, (size,), generator=generator)
    time = torch.linspace(0, 6.28, STEPS)
    frequency = (labels[:, None, None] + 1).float()
    signals = torch.sin(frequency * time) + 0.3 * torch.randn(size, CHANNELS, STEPS,
                                                              generator=generator)
    return TensorDataset(signals, labels)


def make():
    torch.manual_seed(0)
    model = ActivityNet()
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True)
    criterion = nn.NLLLoss()  # the model returns log-probabilities
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, criterion, optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for signals, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(signals), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


LOSS = nn.NLLLoss()


def compute_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loss helper: the model's output reaches the loss through a parameter."""
    return LOSS(outputs, targets)


def train_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer) -> None:
    for signals, labels in loader:
        optimizer.zero_grad()
        loss = compute_loss(model(signals), labels)
        loss.backward()
        optimizer.step()


def run_step(model: nn.Module, loss_fn: nn.Module, signals: torch.Tensor,
             labels: torch.Tensor) -> torch.Tensor:
    return loss_fn(model(signals), labels)


def train_with_helpers() -> None:
    """The same training, split into a loss helper, an epoch function and a step."""
    model = ActivityNet()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_epoch(model, loader, optimizer)
    signals, labels = next(iter(loader))
    run_step(model, nn.NLLLoss(), signals, labels).backward()


if __name__ == "__main__":
    main()
