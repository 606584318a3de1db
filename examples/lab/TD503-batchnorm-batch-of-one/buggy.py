"""A churn classifier with BatchNorm whose training set leaves one example for the last batch.

1025 customer records in batches of 64 leave a last batch of a single example. In training
mode `BatchNorm1d` needs more than one value per channel, so the last step of the first
epoch raises `ValueError: Expected more than 1 value per channel when training`, after the
whole epoch's work. `main()` runs a short smoke test that stops before that batch.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 20
RECORDS = 1025


def make_dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(RECORDS, FEATURES, generator=generator)
    churned = (inputs[:, :4].sum(dim=1) + 0.5 * torch.randn(RECORDS, generator=generator)) > 0
    return TensorDataset(inputs, churned.long())


class ChurnClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(),
        )
        self.head = nn.Linear(32, 2)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(inputs))


def make():
    torch.manual_seed(0)
    model = ChurnClassifier()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main(smoke_steps: int = 10) -> None:
    model, loader, criterion, optimizer = make()
    for step, (inputs, labels) in enumerate(loader):
        if step == smoke_steps:
            break
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        print(f"step {step}: batch of {len(labels)}, loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
