"""Demand forecasting regressor trained by a small callback-driven Trainer.
A few store records carry unit errors (values x25), so gradient clipping is
added as a callback, the way the other per-batch extras are."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_records(n, seed, corrupt_frac):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    y = (x[:, :3].sum(1) - 0.5 * x[:, 3] * x[:, 4]).unsqueeze(1)
    bad = torch.rand(n, 1, generator=g) < corrupt_frac
    return x, torch.where(bad, y * 25.0, y)


class Callback:
    def on_after_backward(self, trainer):
        pass

    def on_batch_end(self, trainer):
        pass


class GradClip(Callback):
    def __init__(self, max_norm):
        self.max_norm = max_norm

    def on_after_backward(self, trainer):
        nn.utils.clip_grad_norm_(trainer.model.parameters(), self.max_norm)


class LossMeter(Callback):
    def __init__(self):
        self.values = []

    def on_batch_end(self, trainer):
        self.values.append(trainer.last_loss)


class Trainer:
    def __init__(self, model, optimizer, loss_fn, callbacks):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.callbacks = callbacks
        self.last_loss = None

    def _emit(self, event):
        for cb in self.callbacks:
            getattr(cb, event)(self)

    def train_batch(self, xb, yb):
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(xb), yb)
        loss.backward()
        self._emit("on_after_backward")
        self.optimizer.step()
        self.last_loss = loss.item()
        self._emit("on_batch_end")

    def fit(self, loader, epochs, evaluate):
        for epoch in range(epochs):
            self.model.train()
            for xb, yb in loader:
                self.train_batch(xb, yb)
            print(f"epoch {epoch} clean_val_mse={evaluate(self.model):.4f}")


def main():
    torch.manual_seed(0)
    x, y = make_records(3000, seed=1, corrupt_frac=0.03)
    xv, yv = make_records(800, seed=2, corrupt_frac=0.0)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    meter = LossMeter()
    trainer = Trainer(model, optimizer, nn.MSELoss(), [GradClip(max_norm=1.0), meter])

    def evaluate(m):
        m.eval()
        with torch.no_grad():
            return nn.functional.mse_loss(m(xv), yv).item()

    trainer.fit(loader, epochs=4, evaluate=evaluate)
    print(f"final clean_val_mse={evaluate(model):.4f} batches={len(meter.values)}")


if __name__ == "__main__":
    main()
