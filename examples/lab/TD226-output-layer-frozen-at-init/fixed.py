"""Fixed: the backbone is frozen before the new head is attached, so the head trains."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES = 24, 6


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 64), nn.LayerNorm(64), nn.ReLU())
        self.norm = nn.LayerNorm(64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(self.body(x)))


def make_loader() -> DataLoader:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1024, FEATURES, generator=generator)
    y = (x[:, :CLASSES] * 3).argmax(dim=1)
    return DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


def make() -> tuple:
    torch.manual_seed(0)
    model = Net()
    for name, param in model.named_parameters():
        if "norm" not in name:
            param.requires_grad = False
    model.fc = nn.Linear(64, CLASSES)  # created after freezing: trainable
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, make_loader(), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {criterion(model(x), y).item():.3f}")


if __name__ == "__main__":
    main()
