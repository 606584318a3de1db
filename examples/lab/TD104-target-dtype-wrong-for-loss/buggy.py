"""A wine-quality classifier whose labels were read as float32 along with the features.

CrossEntropyLoss takes class indices as int64. With float labels of shape [N] the first
loss call raises "expected target dtype to be Long or Byte, but got Float", an error
that never mentions the labels' origin.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, GRADES = 11, 6


class QualityModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, GRADES))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features)


def read_table(size: int = 384) -> torch.Tensor:
    """The CSV as one float table: 11 measurements, then the grade (0-5) in the last column."""
    generator = torch.Generator().manual_seed(1)
    grades = torch.randint(0, GRADES, (size, 1), generator=generator).float()
    features = torch.randn(size, FEATURES, generator=generator) + grades / 2
    return torch.cat([features, grades], dim=1)


def make():
    torch.manual_seed(0)
    table = read_table()
    features, grades = table[:, :FEATURES], table[:, FEATURES]
    loader = DataLoader(TensorDataset(features, grades), batch_size=32, shuffle=True)
    model = QualityModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, grades in loader:
            optimizer.zero_grad()
            grades = grades.float()  # expect[lint]: TD104
            loss = criterion(model(features), grades)  # expect[run]: TD104
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
