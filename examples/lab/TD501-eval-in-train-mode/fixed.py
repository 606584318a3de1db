"""Fixed: evaluation switches the model to eval mode, and back to train mode after."""

import torch
from torch import nn

FEATURES, CLASSES = 32, 4


def make_data(count: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(count)
    x = torch.randn(count, FEATURES, generator=generator)
    return torch.utils.data.TensorDataset(x, (x[:, :CLASSES] * 2).argmax(dim=1))


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
                         nn.Dropout(0.3), nn.Linear(64, CLASSES))


def evaluate(model: nn.Module, loader: torch.utils.data.DataLoader) -> float:
    correct = 0
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(dim=1) == y).sum().item()
    model.train()
    return correct / len(loader.dataset)


def main() -> None:
    torch.manual_seed(0)
    train = torch.utils.data.DataLoader(make_data(2048), batch_size=64, shuffle=True)
    valid = torch.utils.data.DataLoader(make_data(512), batch_size=128)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for x, y in train:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        print(f"epoch {epoch}: validation accuracy {evaluate(model, valid):.3f}")


if __name__ == "__main__":
    main()
