"""Tabular regression: standardised features, MSE on [N, 1] predictions and [N, 1] targets.

The targets are kept as a column (`unsqueeze(1)`) so they match the model's [N, 1] output
and MSE does not broadcast. Target standardisation uses training-set statistics.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n=400):
    generator = torch.Generator().manual_seed(19)
    features = torch.randn(n, 6, generator=generator) * torch.tensor([1.0, 10.0, 0.1, 5.0, 1.0, 2.0])
    price = 3 * features[:, 0] + 0.2 * features[:, 1] - 8 * features[:, 2] + torch.sin(features[:, 3])
    price = price + 0.1 * torch.randn(n, generator=generator)
    mean, std = features.mean(dim=0), features.std(dim=0)
    target_mean, target_std = price.mean(), price.std()
    x = (features - mean) / std
    y = ((price - target_mean) / target_std).unsqueeze(1)
    return x, y


def build_model():
    return nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))


def make():
    torch.manual_seed(0)
    x, y = make_data(64)
    model = build_model()
    return model, (x, y), nn.MSELoss(), torch.optim.Adam(model.parameters(), lr=1e-2)


def main():
    torch.manual_seed(0)
    x, y = make_data()
    loader = DataLoader(TensorDataset(x[:320], y[:320]), batch_size=32, shuffle=True)
    model = build_model()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(5):
        model.train()
        for features, target in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), target)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = criterion(model(x[320:]), y[320:]).item()
        print(f"epoch {epoch}: validation mse {val:.4f}")


if __name__ == "__main__":
    main()
