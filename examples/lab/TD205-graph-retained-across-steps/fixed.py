"""Fixed: the epoch total adds Python floats (`loss.item()`), and the averager reads the
loss through `.data`, so each graph is freed."""

import torch
from torch import nn

FEATURES, CLASSES = 32, 4


def make_data(count: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    return x, (x[:, :CLASSES] * 3).argmax(dim=1)


class Averager:
    """Keeps a running mean of a loss through `.data`: a number, never a graph."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0

    def add(self, value: torch.Tensor) -> None:
        self.count += value.data.numel()
        self.total += float(value.data.sum())

    def mean(self) -> float:
        return self.total / max(self.count, 1)


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        running_loss = 0.0
        average = Averager()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            average.add(loss)
        print(f"epoch {epoch}: mean loss {running_loss / len(loader):.4f} ({average.mean():.4f})")


if __name__ == "__main__":
    main()
