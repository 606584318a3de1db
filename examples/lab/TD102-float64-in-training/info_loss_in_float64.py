"""A multi-label classifier whose loss alone is computed in float64.

The network and its inputs stay float32; only the logits and the targets are cast to
float64 for the loss, a numerics choice over batch x labels values that costs little.
True that float64 is used, but not the slow float64 model the rule is about: information.
"""

import torch
import torch.nn.functional as F
from torch import nn

LABELS = 5


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, LABELS))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(
            logits.double(), labels.double()  # expect: TD102
        )

    def fit(self, steps: int = 40) -> float:
        for _ in range(steps):
            x = torch.randn(64, 16)
            labels = (x[:, :LABELS] > 0).float()
            loss = self.loss(self.model(x), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


def fit_plain(steps: int = 40) -> float:
    model = nn.Linear(16, LABELS)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        x = torch.randn(64, 16)
        targets = x[:, :LABELS].gt(0).to(torch.float64)  # expect: TD102
        loss = criterion(model(x).double(), targets)  # expect: TD102
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    print(f"trainer: {Trainer().fit():.4f}  plain: {fit_plain():.4f}")


if __name__ == "__main__":
    main()
