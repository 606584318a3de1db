"""The freezing helper fixed: ``requires_grad_`` sets the flag of every parameter."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 2)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(inputs))


def set_trainable(module: nn.Module, trainable: bool) -> nn.Module:
    module.requires_grad_(trainable)
    return module


def fine_tune(model: Net, loader: DataLoader) -> None:
    set_trainable(model.encoder, False)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for inputs, labels in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(256, 20)
    labels = (inputs[:, 0] > 0).long()
    fine_tune(Net(), DataLoader(TensorDataset(inputs, labels), batch_size=32, shuffle=True))
