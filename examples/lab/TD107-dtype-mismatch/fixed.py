"""House-price regression; the NumPy features are converted to float32 where they enter."""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    features = rng.normal(size=(512, 6))  # float64, NumPy's default
    prices = features @ rng.normal(size=6) + 0.1 * rng.normal(size=512)
    return features, prices


def main() -> None:
    torch.manual_seed(0)
    features, prices = make_data(np.random.default_rng(0))
    dataset = TensorDataset(torch.from_numpy(features).float(),
                            torch.from_numpy(prices).float().unsqueeze(1))
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
