"""A house-price regressor whose [N, 1] output is compared with [N] targets by MSELoss.

The shapes broadcast to [N, N]: each prediction is scored against every house's price,
so the model learns to predict the batch mean and the loss stalls at the targets'
variance.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 8


class PriceModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features)  # shape [N, 1]


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    weights = torch.randn(FEATURES, generator=generator)
    prices = features @ weights + 0.1 * torch.randn(size, generator=generator)  # shape [N]
    return TensorDataset(features, prices)


def make():
    torch.manual_seed(0)
    model = PriceModel()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.MSELoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(5):
        for features, prices in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), prices)  # expect[run]: TD306
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
