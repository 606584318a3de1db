"""An energy-use regressor on NumPy data converted to float32 once, when the dataset is built."""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 12


class EnergyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))
        # Constants may be computed in float64 for accuracy: what counts is the dtype they
        # have where they are used, float32 once registered.
        weights = torch.linspace(1.0, 1.1, FEATURES, dtype=torch.float64).cumprod(0)
        self.register_buffer("feature_weights", (weights / weights.max()).float())

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features * self.feature_weights).squeeze(-1)


def make_dataset(size: int = 512) -> TensorDataset:
    rng = np.random.default_rng(1)
    features = rng.normal(size=(size, FEATURES))
    usage = features @ rng.normal(size=FEATURES) + 0.1 * rng.normal(size=size)
    return TensorDataset(torch.from_numpy(features).float(), torch.from_numpy(usage).float())


def make():
    torch.manual_seed(0)
    model = EnergyModel()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.MSELoss(), optimizer


def save_checkpoint(path: str) -> None:
    """The ckpt lab's entry point: one epoch of training, then the weights as saved."""
    model, loader, criterion, optimizer = make()
    for features, usage in loader:
        optimizer.zero_grad()
        loss = criterion(model(features), usage)
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), path)


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, usage in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), usage)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f} ({loss.dtype})")


if __name__ == "__main__":
    main()
