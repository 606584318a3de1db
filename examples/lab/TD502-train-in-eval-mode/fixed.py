"""Fixed: `model.train()` at the start of every epoch, after each validation."""

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
    for epoch in range(3):
        model.train()
        for x, y in train:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(x).argmax(dim=1) == y).sum().item() for x, y in valid)
        print(f"epoch {epoch}: validation accuracy {correct / 512:.3f}")


def make() -> tuple:
    """For `check`: the objects as each epoch's loop gets them, after `model.train()`."""
    torch.manual_seed(0)
    train = torch.utils.data.DataLoader(make_data(2048), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Dropout(0.3), nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.eval()
    model.train()
    return model, train, nn.functional.cross_entropy, optimizer


if __name__ == "__main__":
    main()
