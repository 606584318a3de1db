"""Property-price regressor on 1002 synthetic listings, split 80/20 with
random_split; the network comes from the shared factory in nets.py."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split

from nets import make_regressor

BATCH_SIZE = 32


def make_listings(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    y = (x[:, 0] * 2 + x[:, 1] * x[:, 2] - x[:, 3].abs()).unsqueeze(1)
    return TensorDataset(x, y)


def build():
    data = make_listings(1002, seed=1)
    n_train = int(0.8 * len(data))
    train_set, val_set = random_split(data, [n_train, len(data) - n_train],
                                      generator=torch.Generator().manual_seed(2))
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    model = make_regressor(12)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, F.mse_loss, optimizer, val_set


def main():
    torch.manual_seed(0)
    model, loader, loss_fn, optimizer, val_set = build()
    xv = torch.stack([val_set[i][0] for i in range(len(val_set))])
    yv = torch.stack([val_set[i][1] for i in range(len(val_set))])
    print(f"train samples={len(loader.dataset)} batches/epoch={len(loader)}")
    for epoch in range(5):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            print(f"epoch {epoch} val_mse={loss_fn(model(xv), yv).item():.4f}")


if __name__ == "__main__":
    main()
