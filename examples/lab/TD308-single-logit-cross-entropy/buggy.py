"""A churn classifier with one output unit, trained with cross-entropy on 0/1 targets.

The [N, 1] float targets are read as class probabilities over a single class, and
`cross_entropy` over a single class is `log_softmax` of one value, exactly 0: the loss is 0
for every batch, every gradient is 0, and the classifier never learns.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 20


class ChurnModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)  # one score per customer

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(features))


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    churned = (features[:, 0] + features[:, 1] > 0).float().unsqueeze(1)  # [N, 1]
    return TensorDataset(features, churned)


def make():
    torch.manual_seed(0)
    model = ChurnModel()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, _, optimizer = make()
    for epoch in range(5):
        for features, churned in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(features), churned)
            loss.backward()  # expect[run]: TD308
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
