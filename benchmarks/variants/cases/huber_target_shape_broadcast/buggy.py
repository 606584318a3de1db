"""Battery remaining-life regressor with a robust (Huber) loss. The target
column is read as a flat vector; the model predicts one value per sample."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_cells(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    life = 3.0 + x[:, 0] - 0.7 * x[:, 1] + 0.5 * x[:, 2] * x[:, 3] + 0.1 * torch.randn(n, generator=g)
    return x, life


class LifeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return self.body(x)

    def compute_loss(self, batch):
        x, target = batch
        return F.huber_loss(self(x), target, delta=1.0)


def build():
    loader = DataLoader(TensorDataset(*make_cells(3000, seed=1)), batch_size=64, shuffle=True)
    model = LifeModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, F.huber_loss, optimizer


def main():
    torch.manual_seed(0)
    model, loader, _, optimizer = build()
    xv, yv = make_cells(800, seed=2)
    for epoch in range(4):
        model.train()
        for batch in loader:
            optimizer.zero_grad()
            model.compute_loss(batch).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            rmse = (model(xv).flatten() - yv.flatten()).pow(2).mean().sqrt().item()
        print(f"epoch {epoch} val_rmse={rmse:.4f}")


if __name__ == "__main__":
    main()
