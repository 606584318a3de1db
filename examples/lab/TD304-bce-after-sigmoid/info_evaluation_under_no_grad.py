"""A validation helper scores a sigmoid model with BCELoss under ``torch.no_grad()``.

The pairing is the same as in the training loop of ``buggy.py``, but here no gradient
flows: the only effect left is that a confidently wrong example's loss is clamped at 100
in the reported value. True, and worth knowing, but not a bug in training.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 20


class SpamScorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.body(inputs)).squeeze(1)


def validate(model: nn.Module, loader: DataLoader) -> float:
    criterion = nn.BCELoss(reduction="sum")
    model.eval()
    total = 0.0
    with torch.no_grad():
        for inputs, targets in loader:
            total += criterion(model(inputs), targets).item()  # expect: TD304
    return total / len(loader.dataset)


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(256, FEATURES)
    targets = (inputs[:, :3].sum(dim=1) > 0).float()
    model = SpamScorer()
    print(f"validation loss {validate(model, DataLoader(TensorDataset(inputs, targets), batch_size=64)):.4f}")
