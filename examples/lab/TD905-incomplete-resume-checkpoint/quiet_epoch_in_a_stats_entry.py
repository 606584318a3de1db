"""A NeRF-style trainer that keeps its epoch counter inside a pickled statistics object.

The checkpoint holds the model, the optimizer and `pickle.dumps(stats)`; the resume reads
the epoch back from that entry (`start_epoch = stats.epoch`), so the count survives a
restart although no key is called "epoch".
"""

import os
import pickle
import tempfile

import torch
from torch import nn


class Stats:
    def __init__(self) -> None:
        self.epoch = 0
        self.losses: list[float] = []


def train(path: str, epochs: int, resume: bool) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    stats, start_epoch = Stats(), 0
    if resume and os.path.isfile(path):
        loaded = torch.load(path, weights_only=True)
        model.load_state_dict(loaded["model"])
        optimizer.load_state_dict(loaded["optimizer"])
        stats = pickle.loads(loaded["stats"])
        start_epoch = stats.epoch + 1
    x = torch.randn(64, 4)
    y = x.sum(1, keepdim=True)
    for epoch in range(start_epoch, epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        stats.epoch = epoch
        stats.losses.append(loss.item())
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "stats": pickle.dumps(stats)}
        torch.save(state, path)


if __name__ == "__main__":
    checkpoint = os.path.join(tempfile.gettempdir(), "td905-stats-entry.pt")
    train(checkpoint, 5, resume=False)
    train(checkpoint, 10, resume=True)
