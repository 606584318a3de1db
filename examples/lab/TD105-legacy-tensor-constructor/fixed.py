"""Class-weighted training with every tensor built by a factory function that says what it means."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 4
FEATURES = 16


class ScaledLinear(nn.Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        self.scale = nn.Parameter(torch.ones(1, n_out))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=5**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight.t()) * self.scale


def make_dataset(size: int = 512) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    inputs += torch.empty(size, FEATURES).normal_(0.0, 0.05)
    targets = (inputs[:, 0] > 0.5).long() + 2 * (inputs[:, 1] > 1.0).long()
    return TensorDataset(inputs, targets)


def class_weights(targets: torch.Tensor) -> torch.Tensor:
    counts = torch.zeros(NUM_CLASSES)
    for label in targets.tolist():
        counts[label] += 1
    return counts.sum() / (NUM_CLASSES * counts.clamp(min=1.0))


def main() -> None:
    torch.manual_seed(0)
    dataset = make_dataset()
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    model = nn.Sequential(ScaledLinear(FEATURES, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES))
    criterion = nn.CrossEntropyLoss(weight=class_weights(dataset.tensors[1]))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        total = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: mean loss {total / len(loader):.4f}")


if __name__ == "__main__":
    main()
