"""A classifier put in eval mode for validation and never put back in train mode.

`model.train()` is called once, before the epoch loop. After the first validation the
model stays in eval mode: from the second epoch on, dropout is off (no regularisation)
and BatchNorm normalises with frozen running statistics instead of batch statistics.
"""

import torch
from torch import nn

FEATURES, CLASSES = 32, 4


def make_data(count: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(count)
    x = torch.randn(count, FEATURES, generator=generator)
    return torch.utils.data.TensorDataset(x, (x[:, :CLASSES] * 2).argmax(dim=1))


def main() -> None:
    torch.manual_seed(0)
    train = torch.utils.data.DataLoader(make_data(2048), batch_size=64, shuffle=True)
    valid = torch.utils.data.DataLoader(make_data(512), batch_size=128)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Dropout(0.3), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for epoch in range(3):
        for x, y in train:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()  # expect[run]: TD502
        model.eval()  # expect[lint]: TD502
        with torch.no_grad():
            correct = sum((model(x).argmax(dim=1) == y).sum().item() for x, y in valid)
        print(f"epoch {epoch}: validation accuracy {correct / 512:.3f}")


def make() -> tuple:
    """For `check`: the objects as the second epoch's loop gets them, after a validation
    left the model in eval mode and nothing put it back."""
    torch.manual_seed(0)
    train = torch.utils.data.DataLoader(make_data(2048), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Dropout(0.3), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.eval()  # expect[check]: TD502
    return model, train, nn.functional.cross_entropy, optimizer


if __name__ == "__main__":
    main()
