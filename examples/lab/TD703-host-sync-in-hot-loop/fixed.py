"""Keeps the running sums on the device and reads them back once per epoch.

The sums stay tensors (`loss.detach()`, no `.item()`), so the CPU keeps queuing steps
while the device works; one read per epoch costs nothing. Logging inside the loop is
fine when it is periodic, as the `step % 50 == 0` print below is.
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
    step = 0
    for epoch in range(4):
        total_loss = torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.long, device=device)
        seen = 0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            logits = model(xb)
            loss = criterion(logits, yb)
            loss.backward()
            optimizer.step()
            total_loss += loss.detach() * len(yb)
            correct += (logits.argmax(dim=1) == yb).sum()
            seen += len(yb)
            if step % 50 == 0:
                print(f"step {step}: loss {loss.item():.3f}")
            step += 1
        print(f"epoch {epoch}: loss {total_loss.item() / seen:.3f}, "
              f"accuracy {correct.item() / seen:.3f}")


if __name__ == "__main__":
    main()
