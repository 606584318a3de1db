"""Lets the caching allocator do its job: no `empty_cache()` in the training loop.

Freed blocks stay cached and the next step reuses them. The one call left runs once,
after training, to hand memory back before a different phase of the program (here a
large-batch evaluation) that needs blocks of other sizes.
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
        print(f"epoch {epoch}: last loss {loss.item():.3f}")
    torch.cuda.empty_cache()  # once, between training and evaluation
    model.eval()
    with torch.no_grad():
        x_all, y_all = (t.to(device) for t in loader.dataset.tensors)
        accuracy = (model(x_all).argmax(dim=1) == y_all).float().mean()
    print(f"accuracy {accuracy.item():.3f}")


if __name__ == "__main__":
    main()
