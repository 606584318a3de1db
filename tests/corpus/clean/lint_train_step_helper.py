"""A training step in a helper function, called once per batch from the epoch loop."""

import torch
from torch import nn


def make_data(count: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(count)
    x = torch.randn(count, 10, generator=generator)
    return torch.utils.data.TensorDataset(x, (x.sum(dim=1) > 0).long())


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    criterion: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
) -> float:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(make_data(512), batch_size=32, shuffle=True)
    for epoch in range(2):
        model.train()
        total = 0.0
        for x, y in loader:
            total += train_step(model, optimizer, criterion, x, y)
        print(f"epoch {epoch}: loss {total / len(loader):.3f}")


if __name__ == "__main__":
    main()
