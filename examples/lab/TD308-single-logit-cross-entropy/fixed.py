"""The churn classifier with its single logit trained by BCEWithLogitsLoss on float targets."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 20


class ChurnModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)  # one logit per customer: the log-odds of churn

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(features)).squeeze(1)


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    churned = (features[:, 0] + features[:, 1] > 0).float()
    return TensorDataset(features, churned)


def make():
    torch.manual_seed(0)
    model = ChurnModel()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.BCEWithLogitsLoss(), optimizer


def main() -> None:
    model, loader, _, optimizer = make()
    for epoch in range(5):
        for features, churned in loader:
            optimizer.zero_grad()
            loss = F.binary_cross_entropy_with_logits(model(features), churned)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
