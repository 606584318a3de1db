"""Saves the model's state_dict and rebuilds the model in code before loading it.

The file holds only tensors, loads with `weights_only=True`, and survives any refactor of
the class as long as the parameter names stay the same.
"""

import os
import tempfile

import torch
from torch import nn


class TextClassifier(nn.Module):
    def __init__(self, vocabulary: int = 100, width: int = 16, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, width)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(tokens))


def make_model() -> nn.Module:
    return TextClassifier()


def train(model: nn.Module, steps: int = 30) -> None:
    tokens = torch.randint(0, 100, (256, 12))
    labels = tokens[:, 0] % 4
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        batch = torch.randint(0, 256, (32,))
        optimizer.zero_grad()
        loss = criterion(model(tokens[batch]), labels[batch])
        loss.backward()
        optimizer.step()


def save_checkpoint(path: str) -> None:
    torch.manual_seed(0)
    model = make_model()
    train(model)
    torch.save(model.state_dict(), path)


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td903-classifier-fixed.pt")
    save_checkpoint(path)
    model = make_model()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    print("reloaded:", type(model).__name__)


if __name__ == "__main__":
    main()
