"""Classifier trained with an exponential moving average (EMA) of its
weights; the EMA copy is the one evaluated and exported."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class WeightEMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            gap = s - p
            s.sub_(gap * (1.0 - self.decay))
        for sb, b in zip(self.shadow.buffers(), model.buffers()):
            sb.copy_(b)


def make_points(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g) * 2
    y = ((x[:, 0] ** 2 + x[:, 1] ** 2).sqrt() + 0.4 * torch.randn(n, generator=g) > 2.0).long()
    return x, y


def main():
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(*make_points(4000, seed=1)), batch_size=50, shuffle=True)
    xv, yv = make_points(1000, seed=2)
    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ema = WeightEMA(model, decay=0.99)
    for epoch in range(4):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            ema.update(model)
        with torch.no_grad():
            ema_acc = (ema.shadow(xv).argmax(1) == yv).float().mean().item()
            max_w = max(p.abs().max().item() for p in ema.shadow.parameters())
        print(f"epoch {epoch} train_loss={loss.item():.4f} ema_val_acc={ema_acc:.3f} ema_max_abs_weight={max_w:.3g}")


if __name__ == "__main__":
    main()
