"""Reads the loss and the accuracy back to Python on every training step.

`.item()` waits for the GPU to finish everything queued so far, so the CPU cannot queue
the next step while the current one runs: the device idles between steps. The cost is
largest for small, fast steps; on a CPU-only machine there is nothing to wait for.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    x = torch.randn(2048, 32)
    y = (x[:, :4].sum(dim=1) > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 2)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    loader = make_loader()
    for epoch in range(4):
        total_loss, correct, seen = 0.0, 0, 0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            logits = model(xb)
            loss = criterion(logits, yb)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(yb)  # expect: TD703
            correct += (logits.argmax(dim=1) == yb).sum().item()  # expect: TD703
            seen += len(yb)
        print(f"epoch {epoch}: loss {total_loss / seen:.3f}, accuracy {correct / seen:.3f}")


if __name__ == "__main__":
    main()
