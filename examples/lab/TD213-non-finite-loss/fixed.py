"""A delivery-time regressor that predicts log-minutes directly, so no log of a negative."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 6


class DeliveryTime(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features).squeeze(-1)  # log-minutes: any real value is valid


def log_error(predicted_log: torch.Tensor, minutes: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(predicted_log, torch.log(minutes))


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    minutes = torch.exp(3 + 0.5 * features[:, 0] + 0.1 * torch.randn(size, generator=generator))
    return TensorDataset(features, minutes)


def make():
    torch.manual_seed(0)
    model = DeliveryTime()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, log_error, optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, minutes in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), minutes)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
