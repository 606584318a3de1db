"""Mixed-precision training that builds its GradScaler inside the batch loop.

Each new scaler starts at a loss scale of 65536. When the scaled gradients overflow, the
scaler skips the step and halves its scale, but the next batch builds a fresh scaler at
65536 again: the backed-off scale is never used, and a run whose gradients overflow at
that scale skips every step without an error.
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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.MSELoss()
    for epoch in range(5):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            scaler = torch.amp.GradScaler(device.type)  # expect: TD627
            optimizer.zero_grad()
            with torch.autocast(device.type, dtype=amp_dtype):
                loss = criterion(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
