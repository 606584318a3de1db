"""A trainer whose `--resume` warm-starts from the best checkpoint's weights only: it
reads `["model"]` (and prints the keys), then trains a fresh run from epoch 0 with a new
optimizer and a new cosine schedule.

The checkpoint keeps no scheduler state, but nothing else of the old run is restored
either: a schedule from its first step is what the new run should have.
"""

import argparse
import os
import tempfile

import torch
from torch import nn


def main(resume: bool, folder: str, epochs: int = 3) -> float:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    path = os.path.join(folder, "best_model.pth")
    if resume and os.path.exists(path):
        model.load_state_dict(torch.load(path, map_location="cpu")["model"])
        print(torch.load(path, map_location="cpu").keys())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    loss = torch.zeros(())
    for epoch in range(epochs):
        for _ in range(4):
            x = torch.randn(16, 4)
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            loss.backward()
            opt.step()
        scheduler.step()
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}
        torch.save(state, path)
    return loss.item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args([])
    torch.manual_seed(0)
    folder = tempfile.mkdtemp()
    print(f"{main(args.resume, folder):.3f} {main(True, folder):.3f}")
