"""A project whose own format is the whole pickled model, read back whole by its loader.

The trainer pickles the model object at each epoch and the inference helper of the same
project loads it back as a module, with `weights_only=False` written out (torch 2.6
refuses module objects by default). The save is a choice the project made, and it works:
information, not a warning. A state_dict would still survive refactors better.
"""

import os
import tempfile

import torch
from torch import nn


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.1), nn.Linear(16, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        self.path = os.path.join(tempfile.gettempdir(), "td903-own-format.pt")

    def fit(self, epochs: int = 3) -> None:
        for epoch in range(epochs):
            x = torch.randn(64, 5)
            loss = nn.functional.mse_loss(self.model(x), x[:, :1])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            torch.save({"model": self.model}, self.path)  # expect: TD903


def load_for_inference(path: str) -> nn.Module:
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    return checkpoint["model"].eval()


def main() -> None:
    torch.manual_seed(0)
    trainer = Trainer()
    trainer.fit()
    model = load_for_inference(trainer.path)
    print("reloaded:", type(model).__name__, "in training mode:", model.training)


if __name__ == "__main__":
    main()
