"""Super-resolution-style regression (predict a fine signal from a coarse one)
with a per-epoch exponential LR decay expressed as a LambdaLR. Per-batch
and per-epoch extras are registered as hooks on a tiny event loop."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

EPOCH_DECAY = 0.7


def make_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 1, 64)
    a = torch.rand(n, 3, 1, generator=g) * 2
    f = torch.tensor([1.0, 3.0, 7.0]).view(1, 3, 1)
    fine = (a * torch.sin(6.283 * f * t)).sum(1)
    coarse = fine.view(n, 16, 4).mean(-1)
    return coarse, fine


class Loop:
    def __init__(self):
        self.hooks = {"batch_end": [], "epoch_end": []}

    def on(self, event, fn):
        self.hooks[event].append(fn)

    def fire(self, event, **state):
        for fn in self.hooks[event]:
            fn(**state)


def main():
    torch.manual_seed(0)
    x, y = make_pairs(2048, seed=1)
    xv, yv = make_pairs(512, seed=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 128), nn.GELU(), nn.Linear(128, 64))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda epoch: EPOCH_DECAY ** epoch)
    loop = Loop()
    loop.on("batch_end", lambda **_: scheduler.step())
    loop.on("epoch_end", lambda epoch, **_: print(
        f"epoch {epoch} lr={optimizer.param_groups[0]['lr']:.2e} "
        f"val_mse={nn.functional.mse_loss(model(xv), yv).item():.5f}"))

    for epoch in range(5):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            loop.fire("batch_end", loss=loss)
        with torch.no_grad():
            loop.fire("epoch_end", epoch=epoch)


if __name__ == "__main__":
    main()
