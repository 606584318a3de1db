"""A model that returns logits for BCEWithLogitsLoss; the sigmoid lives only in predict()."""

import torch
from torch import nn


class Detector(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 32), nn.ReLU())
        self.score = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score(self.body(x)).squeeze(-1)

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(x)) > 0.5


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 10)
    y = (x[:, 0] + x[:, 1] > 0).float()
    model = Detector(10)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(50):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    print(f"accuracy {(model.predict(x) == y.bool()).float().mean().item():.2f}")


if __name__ == "__main__":
    main()
