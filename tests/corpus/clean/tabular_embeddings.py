"""Tabular model: NumPy preprocessing, categorical embeddings, raw numeric features
standardised by an input BatchNorm, and a WeightedRandomSampler for class imbalance.

The data is prepared in NumPy (float64 there) and converted with `.float()` before it
reaches torch training. The loader draws with replacement through the sampler, so it is
shuffled even without `shuffle=True` (the two are mutually exclusive).
"""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler


def make_table(n=600, seed=48):
    rng = np.random.default_rng(seed)
    city = rng.integers(0, 5, n)
    product = rng.integers(0, 8, n)
    income = rng.normal(50_000, 15_000, n)
    age = rng.integers(18, 80, n).astype(np.float64)
    logit = (income - 50_000) / 15_000 + 0.8 * (city == 2) - 0.03 * (age - 50) - 1.5
    bought = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    categorical = torch.from_numpy(np.stack([city, product], axis=1)).long()
    numeric = torch.from_numpy(np.stack([income, age], axis=1)).float()
    return categorical, numeric, torch.from_numpy(bought)


class TabularModel(nn.Module):
    def __init__(self, cardinalities=(5, 8), numeric_features=2):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(c, 4) for c in cardinalities])
        self.numeric_norm = nn.BatchNorm1d(numeric_features)
        self.mlp = nn.Sequential(nn.Linear(4 * len(cardinalities) + numeric_features, 32), nn.ReLU(),
                                 nn.Linear(32, 2))

    def forward(self, categorical, numeric):
        embedded = [embedding(categorical[:, i]) for i, embedding in enumerate(self.embeddings)]
        return self.mlp(torch.cat([*embedded, self.numeric_norm(numeric)], dim=1))


def balanced_sampler(labels):
    counts = torch.bincount(labels, minlength=2).float()
    weights = (1.0 / counts)[labels]
    return WeightedRandomSampler(weights, num_samples=len(labels), replacement=True,
                                 generator=torch.Generator().manual_seed(0))


def make():
    torch.manual_seed(0)
    categorical, numeric, labels = make_table(128)
    model = TabularModel()
    return (model, (categorical, numeric, labels), nn.CrossEntropyLoss(),
            torch.optim.Adam(model.parameters(), lr=1e-2))


def main():
    torch.manual_seed(0)
    categorical, numeric, labels = make_table()
    print(f"positive rate {labels.float().mean().item():.2%}")
    loader = DataLoader(TensorDataset(categorical, numeric, labels), batch_size=64,
                        sampler=balanced_sampler(labels))
    model = TabularModel()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(4):
        model.train()
        for cat, num, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(cat, num), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
