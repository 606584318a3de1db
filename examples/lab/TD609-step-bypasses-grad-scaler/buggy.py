"""Mixed-precision training that scales the loss but steps the optimizer directly.

The gradients are still multiplied by the loss scale (65536) when `optimizer.step()` reads
them, so every SGD update is 65536 times too large and the loss turns to NaN within a few
steps; nothing skips the steps whose gradients overflowed either.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 16


def make_dataset(size: int = 512) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = inputs @ torch.randn(FEATURES, 1)
    return TensorDataset(inputs, targets)


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler(device.type)
    criterion = nn.MSELoss()
    for epoch in range(3):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            with torch.autocast(device.type, dtype=amp_dtype):
                loss = criterion(model(inputs), targets)
            scaler.scale(loss).backward()
            optimizer.step()  # expect: TD609
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
