"""A text classifier whose functional dropout follows the module's mode.

Passing `training=self.training` turns dropout off after `model.eval()`, in `forward`
and in the helper method alike.
"""

import torch
import torch.nn.functional as F
from torch import nn


class BagOfWords(nn.Module):
    def __init__(self, vocabulary: int = 100, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, 32)
        self.fc = nn.Linear(32, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        features = F.dropout(self.embedding(tokens), 0.5, training=self.training)
        return self.fc(features)


class TwoLayer(nn.Module):
    def __init__(self, vocabulary: int = 100, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, 32)
        self.hidden = nn.Linear(32, 32)
        self.fc = nn.Linear(32, classes)

    def regularise(self, features: torch.Tensor) -> torch.Tensor:
        return F.dropout(features, p=0.3, training=self.training)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        features = self.regularise(torch.relu(self.hidden(self.embedding(tokens))))
        return self.fc(features)


def accuracy(model: nn.Module, steps: int = 30) -> float:
    tokens = torch.randint(0, 100, (64, 12))
    labels = tokens[:, 0] % 4
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        loss = F.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        return (model(tokens).argmax(1) == labels).float().mean().item()


def main() -> None:
    torch.manual_seed(0)
    print(f"accuracy: {accuracy(BagOfWords()):.2f}, {accuracy(TwoLayer()):.2f}")


if __name__ == "__main__":
    main()
