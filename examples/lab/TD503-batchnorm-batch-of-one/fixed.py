"""A churn classifier with BatchNorm trained with `drop_last=True`.

1025 customer records in batches of 64 would leave a last batch of one example; dropping
the incomplete last batch keeps every BatchNorm batch at 64 examples (the dropped record
is seen in other epochs, in another position of the shuffled order).
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
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True, drop_last=True)
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
