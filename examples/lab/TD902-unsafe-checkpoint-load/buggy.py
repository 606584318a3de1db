"""Saves the argparse Namespace into the checkpoint, so it only loads with weights_only=False.

Since torch 2.6, `torch.load` defaults to `weights_only=True` and refuses this file with
"Unsupported global: GLOBAL argparse.Namespace". The usual "fix", `weights_only=False`,
unpickles whatever the file names: a checkpoint downloaded from elsewhere can then run
arbitrary code on the machine that loads it.
"""

import argparse
import os
import tempfile

import torch
from torch import nn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    return parser.parse_args(argv)


def make_model(hidden: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 2))


def train(model: nn.Module, args: argparse.Namespace) -> torch.optim.Optimizer:
    inputs = torch.randn(256, 8)
    targets = (inputs.sum(dim=1) > 0).long()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for _ in range(args.epochs):
        for start in range(0, 256, 32):
            optimizer.zero_grad()
            loss = criterion(model(inputs[start:start + 32]), targets[start:start + 32])
            loss.backward()
            optimizer.step()
    return optimizer


def save_checkpoint(path: str, argv: list[str] | None = None) -> None:
    torch.manual_seed(0)
    args = parse_args(argv or [])
    model = make_model(args.hidden)
    optimizer = train(model, args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": args.epochs, "args": args}, path)


def load(path: str) -> nn.Module:
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)  # expect[lint]: TD902
    model = make_model(checkpoint["args"].hidden)
    model.load_state_dict(checkpoint["model"])
    return model


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td902-classifier.pt")
    save_checkpoint(path)
    print("reloaded:", type(load(path)).__name__)


if __name__ == "__main__":
    main()
