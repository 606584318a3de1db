"""A 5-star review-rating classifier trained on the stars themselves: labels 1..5.

The model has 5 outputs, valid class indices 0..4; the label 5 is out of range. On CPU
the loss raises "Target 5 is out of bounds"; on CUDA the run dies of a device-side
assert, reported at some later, unrelated line.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, STARS = 24, 5


class RatingModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 48), nn.ReLU(), nn.Linear(48, STARS))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features)


def load_reviews(size: int = 384) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    stars = torch.randint(1, STARS + 1, (size,), generator=generator)  # 1 to 5 stars
    features = torch.randn(size, FEATURES, generator=generator) + stars[:, None] / 5
    return features, stars


def make():
    torch.manual_seed(0)
    features, stars = load_reviews()
    loader = DataLoader(TensorDataset(features, stars), batch_size=32, shuffle=True)
    model = RatingModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for features, stars in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), stars)  # expect[run]: TD403
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
