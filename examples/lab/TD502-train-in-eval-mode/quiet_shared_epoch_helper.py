"""One epoch helper serves both passes; a flag argument tells it whether to train.

The loop calls ``train()``, runs the helper, calls ``eval()`` and runs the helper again
with ``validate=True``. The backward and the step inside the helper sit under
``if not validate:``, so the pass after ``eval()`` never trains: the model is in eval
mode only for the pass that evaluates.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Solver:
    def __init__(self, model: nn.Module, train_loader: DataLoader, val_loader: DataLoader) -> None:
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.model.train()
            train_loss = self.run_epoch(self.train_loader)
            self.model.eval()
            val_loss = self.run_epoch(self.val_loader, validate=True)
            print(f"epoch {epoch}: train {train_loss:.4f}, validation {val_loss:.4f}")

    def run_epoch(self, loader: DataLoader, validate: bool = False) -> float:
        total = 0.0
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(self.model(inputs), targets)
            if not validate:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            total += loss.item()
        return total / len(loader)


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(256, 8)
    targets = inputs.sum(dim=1, keepdim=True)
    data = TensorDataset(inputs, targets)
    model = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 1))
    Solver(model, DataLoader(data, batch_size=32, shuffle=True), DataLoader(data, batch_size=64)).fit(2)
