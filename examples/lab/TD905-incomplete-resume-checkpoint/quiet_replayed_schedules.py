"""A trainer whose resume replays its schedule instead of saving its state.

The warmup-cosine schedule steps once per batch and holds nothing but its step count.
After loading model, optimizer and epoch, the resume helper steps it start_epoch x
batches-per-epoch times, which puts it where the interrupted run left it: no scheduler
state is needed in the checkpoint.
"""

import math
import os
import tempfile
import warnings

import torch
from torch import nn


def warmup_cosine(warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    return factor


class Trainer:
    def __init__(self, epochs: int = 4, batches: int = 8) -> None:
        self.epochs, self.batches = epochs, batches
        self.model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 1))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_cosine(4, epochs * batches)
        )
        self.start_epoch = 0
        self.path = os.path.join(tempfile.gettempdir(), "td905-replayed.pt")

    def resume(self) -> None:
        checkpoint = torch.load(self.path, weights_only=True)
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.start_epoch = checkpoint["epoch"] + 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # stepped before any optimizer step, on purpose
            for _ in range(self.start_epoch * self.batches):
                self.scheduler.step()

    def train_epoch(self) -> float:
        for _ in range(self.batches):
            x = torch.randn(16, 6)
            loss = nn.functional.mse_loss(self.model(x), x[:, :1] * 2)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
        return loss.item()

    def fit(self, stop_after: int | None = None) -> float:
        loss = float("nan")
        for epoch in range(self.start_epoch, self.epochs):
            loss = self.train_epoch()
            torch.save({"model": self.model.state_dict(),
                        "optimizer": self.optimizer.state_dict(), "epoch": epoch}, self.path)
            if stop_after is not None and epoch + 1 >= stop_after:
                break
        return loss


def main() -> None:
    torch.manual_seed(0)
    Trainer().fit(stop_after=2)
    resumed = Trainer()
    resumed.resume()
    print(f"resumed at epoch {resumed.start_epoch}, final loss {resumed.fit():.4f}")


if __name__ == "__main__":
    main()
