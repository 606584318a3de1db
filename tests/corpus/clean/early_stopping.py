"""Early stopping on validation loss, with ReduceLROnPlateau and best-weights restore.

The best weights are kept as detached clones (not references to the live tensors), and
restored with `load_state_dict` when patience runs out. `ReduceLROnPlateau.step` takes
the validation loss once per epoch.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PATIENCE = 3


def make_splits():
    generator = torch.Generator().manual_seed(30)
    x = torch.randn(300, 5, generator=generator)
    y = (x[:, :1] ** 2 + x[:, 1:2]) + 0.3 * torch.randn(300, 1, generator=generator)
    return (DataLoader(TensorDataset(x[:240], y[:240]), batch_size=24, shuffle=True),
            DataLoader(TensorDataset(x[240:], y[240:]), batch_size=60))


def validation_loss(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y).item() * len(x)
    model.train()
    return total / len(loader.dataset)


def main():
    torch.manual_seed(0)
    train_loader, val_loader = make_splits()
    model = nn.Sequential(nn.Linear(5, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1))
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)

    best_loss, best_state, bad_epochs = float("inf"), None, 0
    model.train()
    for epoch in range(30):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        val = validation_loss(model, val_loader, criterion)
        scheduler.step(val)
        if val < best_loss - 1e-4:
            best_loss, bad_epochs = val, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad_epochs += 1
            if bad_epochs >= PATIENCE:
                print(f"stopping at epoch {epoch}")
                break
        print(f"epoch {epoch}: val {val:.4f}")
    model.load_state_dict(best_state)
    print(f"restored best weights (val {best_loss:.4f}); check {validation_loss(model, val_loader, criterion):.4f}")


if __name__ == "__main__":
    main()
