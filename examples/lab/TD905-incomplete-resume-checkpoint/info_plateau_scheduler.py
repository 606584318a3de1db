"""A speech-separation trainer that resumes the model, the optimizer and the epoch, but
not its ReduceLROnPlateau scheduler.

The learning rate itself comes back with the optimizer's state; only the scheduler's best
value and its count of epochs without progress restart, so the next reduction can come up
to `patience` epochs late. True, and worth a line, but no schedule restarts: information.
"""

import os
import tempfile

import torch
from torch import nn
from torch.optim.lr_scheduler import ReduceLROnPlateau


class Trainer:
    def __init__(self, path: str, resume: bool) -> None:
        self.path = path
        self.model = nn.Linear(8, 8)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.scheduler = ReduceLROnPlateau(self.optimizer, factor=0.5, patience=2)
        self.epoch = 0
        if resume and os.path.isfile(path):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
            self.model.load_state_dict(ckpt["model_state_dict"])
            self.optimizer.load_state_dict(ckpt["optim_state_dict"])
            self.epoch = ckpt["epoch"]

    def run(self, epochs: int) -> None:
        x = torch.randn(64, 8)
        while self.epoch < epochs:
            self.epoch += 1
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(x), x)
            loss.backward()
            self.optimizer.step()
            self.scheduler.step(loss.item())
            state = {
                "epoch": self.epoch,
                "model_state_dict": self.model.state_dict(),
                "optim_state_dict": self.optimizer.state_dict(),
            }
            torch.save(state, self.path)  # expect: TD905


if __name__ == "__main__":
    checkpoint = os.path.join(tempfile.gettempdir(), "td905-plateau.pt")
    Trainer(checkpoint, resume=False).run(3)
    Trainer(checkpoint, resume=True).run(6)
