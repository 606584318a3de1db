"""Loaders rebuilt once per pass and read whole, without persistent workers.

A loader built once restarts its worker processes at every new pass anyway (unless
`persistent_workers=True`), so rebuilding one per epoch costs nothing more: information,
with the better setup as the hint. Two shapes: a plain epoch loop, and a trainer whose
epoch helper receives the new loader.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(size: int = 128) -> TensorDataset:
    inputs = torch.randn(size, 6)
    return TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))


def fit_plain(epochs: int = 2) -> float:
    dataset = make_dataset()
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=1)  # expect: TD406
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
    return loss.item()


class Trainer:
    def __init__(self) -> None:
        self.dataset = make_dataset()
        self.model = nn.Linear(6, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def run_epoch(self, loader: DataLoader) -> float:
        for inputs, targets in loader:
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(inputs), targets)
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def fit(self, epochs: int = 2) -> float:
        for epoch in range(epochs):
            loader = DataLoader(self.dataset, batch_size=32, num_workers=1)  # expect: TD406
            loss = self.run_epoch(loader)
        return loss


def main() -> None:
    torch.manual_seed(0)
    print(f"plain: {fit_plain():.4f}  trainer: {Trainer().fit():.4f}")


if __name__ == "__main__":
    main()
