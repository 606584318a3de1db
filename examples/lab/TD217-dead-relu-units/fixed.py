"""A churn classifier with zero-initialised biases: every ReLU unit fires for some customers."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 20


class ChurnModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 128)
        self.activation = nn.ReLU()
        self.out = nn.Linear(128, 2)
        nn.init.xavier_uniform_(self.hidden.weight)
        nn.init.zeros_(self.hidden.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.out(self.activation(self.hidden(features)))


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    churned = (features[:, :4].sum(dim=1) + 0.5 * torch.randn(size, generator=generator) > 0)
    return TensorDataset(features, churned.long())


def make():
    torch.manual_seed(0)
    model = ChurnModel()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, churned in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), churned)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
