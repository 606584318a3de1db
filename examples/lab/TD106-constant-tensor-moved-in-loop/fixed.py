"""Imbalanced binary classification with its constant tensors built once, on the device."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 8


def make_dataset(size: int = 512) -> TensorDataset:
    inputs = torch.randn(size, FEATURES) + 3.0
    targets = (inputs[:, 0] > 4.0).long()
    return TensorDataset(inputs, targets)


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    feature_mean = torch.full((FEATURES,), 3.0, device=device)
    class_weight = torch.tensor([1.0, 5.0], device=device)
    for epoch in range(3):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            inputs = inputs - feature_mean
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets, weight=class_weight)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
