"""The same training script, with the program started under the main-module guard."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 12


def make_dataset(size: int = 256) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = inputs @ torch.linspace(-1.0, 1.0, FEATURES)
    return TensorDataset(inputs, targets.unsqueeze(1))


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True, num_workers=2)
    model = nn.Sequential(nn.Linear(FEATURES, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.MSELoss()
    for epoch in range(2):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
