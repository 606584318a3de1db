"""Empties the CUDA cache after every training step, "to save memory".

PyTorch's caching allocator keeps freed blocks so the next step can reuse them without
asking the driver. `torch.cuda.empty_cache()` hands them all back, so every step pays
for fresh `cudaMalloc` calls (which synchronise the device) and the memory in use does
not go down at all. On a CPU-only machine the call does nothing, so this runs anywhere.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    x = torch.randn(1024, 20)
    y = (x.sum(dim=1) > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    loader = make_loader()
    for epoch in range(5):
        model.train()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            torch.cuda.empty_cache()  # expect: TD702
        print(f"epoch {epoch}: last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
