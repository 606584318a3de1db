"""Pretrain on a large labelled set inside a training wrapper, save the
wrapper's checkpoint, then fine-tune a fresh bare network from that
checkpoint on a small labelled set (few-shot transfer)."""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(24, 6, generator=torch.Generator().manual_seed(9))
    x = torch.randn(n, 24, generator=g)
    return x, torch.tanh(x @ w).pow(2).argmax(1)


def make_net():
    return nn.Sequential(nn.Linear(24, 96), nn.ReLU(), nn.Linear(96, 96), nn.ReLU(), nn.Linear(96, 6))


class TrainingWrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def fit(self, x, y, epochs, lr):
        opt = torch.optim.Adam(self.parameters(), lr=lr)
        for _ in range(epochs):
            for xb, yb in DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True):
                opt.zero_grad()
                F.cross_entropy(self.model(xb), yb).backward()
                opt.step()


def accuracy(net, x, y):
    with torch.no_grad():
        return (net(x).argmax(1) == y).float().mean().item()


def restore(net, path):
    checkpoint = torch.load(path)
    state = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()}
    result = net.load_state_dict(state, strict=False)
    return len(result.missing_keys)


def main():
    torch.manual_seed(0)
    xv, yv = make_data(2000, seed=3)
    wrapper = TrainingWrapper(make_net())
    wrapper.fit(*make_data(8000, seed=1), epochs=4, lr=2e-3)
    print(f"pretrained val_acc={accuracy(wrapper.model, xv, yv):.3f}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pretrain.ckpt")
        torch.save({"state_dict": wrapper.state_dict(), "epoch": 4}, path)
        net = make_net()
        missing = restore(net, path)
    xs, ys = make_data(120, seed=2)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(20):
        optimizer.zero_grad()
        F.cross_entropy(net(xs), ys).backward()
        optimizer.step()
    print(f"fine-tuned val_acc={accuracy(net, xv, yv):.3f} missing_keys_at_load={missing}")


if __name__ == "__main__":
    main()
