"""Click-through prediction on synthetic user/item features.
Model and loss are picked by name from one experiment config."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from models import build_scorer

CONFIG = {
    "model": {"in_features": 16, "hidden": 64, "depth": 2, "output": "logits"},
    "loss": "bce_logits",
    "lr": 0.05,
    "epochs": 3,
}

LOSSES = {
    "bce_logits": F.binary_cross_entropy_with_logits,
    "mse": F.mse_loss,
}


def make_clicks(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.linspace(-1.0, 1.0, 16)
    logit = 2.0 * (x @ w) / 4 + 0.8 * x[:, 0] * x[:, 1]
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float().unsqueeze(1)
    return x, y


def auc(scores, labels):
    order = scores.flatten().argsort()
    ranks = torch.empty_like(order, dtype=torch.float)
    ranks[order] = torch.arange(1, len(order) + 1, dtype=torch.float)
    pos = labels.flatten() > 0.5
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return (ranks[pos].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def build(cfg):
    x, y = make_clicks(6000, seed=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = build_scorer(cfg["model"])
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.9)
    return model, loader, LOSSES[cfg["loss"]], optimizer


def main():
    torch.manual_seed(0)
    model, loader, loss_fn, optimizer = build(CONFIG)
    xt, yt = make_clicks(2000, seed=2)
    for epoch in range(CONFIG["epochs"]):
        model.train()
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
        model.eval()
        with torch.no_grad():
            scores = model(xt)
            test_loss = loss_fn(scores, yt).item()
        print(f"epoch {epoch} train_loss={total / len(loader.dataset):.4f} "
              f"test_loss={test_loss:.4f} test_auc={auc(scores, yt):.3f}")


if __name__ == "__main__":
    main()
