"""Two-stage transfer: pretrain an encoder+head on a source task, then adapt a
new head on a shifted target task while keeping the encoder fixed. The
stage's trainable parts are switched by a small helper."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_task(n, seed, shift):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    proj = torch.randn(20, 4, generator=torch.Generator().manual_seed(7))
    feats = torch.tanh(x @ proj)
    y = (feats[:, 0] + shift * feats[:, 1] - 0.5 * feats[:, 2] > 0).long()
    return x, y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def set_trainable(module, trainable):
    module.requires_grad = trainable
    return module


def run_stage(model, loader, epochs, lr):
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def adaptation_setup(model):
    set_trainable(model.encoder, False)
    model.head = nn.Linear(32, 2)
    return model


def main():
    torch.manual_seed(0)
    xs, ys = make_task(3000, seed=1, shift=0.0)
    xt, yt = make_task(600, seed=2, shift=1.5)
    model = Net()
    run_stage(model, DataLoader(TensorDataset(xs, ys), batch_size=64, shuffle=True), epochs=3, lr=1e-2)
    before = torch.cat([p.detach().flatten().clone() for p in model.encoder.parameters()])
    print(f"source: source_acc={accuracy(model, xs, ys):.3f}")

    adaptation_setup(model)
    run_stage(model, DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True), epochs=4, lr=1e-2)
    after = torch.cat([p.detach().flatten() for p in model.encoder.parameters()])
    print(f"adapted: target_acc={accuracy(model, xt, yt):.3f} encoder_drift={(after - before).norm():.4f}")


if __name__ == "__main__":
    main()
