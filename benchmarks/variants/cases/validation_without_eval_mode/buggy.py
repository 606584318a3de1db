"""Heart-sound feature classifier with BatchNorm and heavy Dropout, model
selection by validation accuracy (the best epoch's weights are kept)."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(4, 40, generator=torch.Generator().manual_seed(21)) * 0.6
    y = torch.randint(0, 4, (n,), generator=g)
    x = centres[y] + torch.randn(n, 40, generator=g)
    return x * 5 + 3, y


def build_model():
    return nn.Sequential(nn.Linear(40, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.6),
                         nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.6),
                         nn.Linear(256, 4))


def validate(model, loader):
    correct = 0
    with torch.no_grad():
        for xb, yb in loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
    return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(*make_split(3000, seed=1)), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(*make_split(1000, seed=2)), batch_size=20)
    xt, yt = make_split(2000, seed=3)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    best_acc, best_state, history = -1.0, None, []
    for epoch in range(5):
        model.train()
        for xb, yb in train:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        acc = validate(model, val)
        history.append(round(acc, 3))
        if acc > best_acc:
            best_acc, best_state = acc, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        test_acc = (model(xt).argmax(1) == yt).float().mean().item()
    print(f"val_acc per epoch={history} best_val_acc={best_acc:.3f} test_acc={test_acc:.3f}")


if __name__ == "__main__":
    main()
