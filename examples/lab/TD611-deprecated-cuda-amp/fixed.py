"""Mixed-precision training on the device-generic torch.amp API."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 16


def make_dataset(size: int = 512) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = (inputs[:, 0] > 0).long()
    return TensorDataset(inputs, targets)


def main() -> None:
    torch.manual_seed(0)
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=use_cuda)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            with torch.amp.autocast("cuda", enabled=use_cuda):
                loss = criterion(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
