"""Saves the whole model object with torch.save(model) instead of its state_dict.

The file pickles the `TextClassifier` class by reference (module path and name), not its
code. It loads only with `weights_only=False` and only where the same class exists at the
same import path: rename the module, move the class, or load from another project, and it
fails with "Can't get attribute 'TextClassifier' on <module ...>".
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
    model = TextClassifier()
    train(model)
    torch.save(model, path)  # expect[lint]: TD903


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td903-classifier.pt")
    save_checkpoint(path)
    model = torch.load(path, map_location="cpu", weights_only=False)
    print("reloaded:", type(model).__name__)


if __name__ == "__main__":
    main()
