"""Three text classifiers whose dropout is still on when they are evaluated.

`F.dropout(x, p)` defaults to `training=True`: after `model.eval()` it keeps zeroing
activations, so the validation accuracy is noisy and lower than it should be. The same
mistake is arranged three ways: in `forward` (a plain loop evaluates it), in a helper
method (a trainer class evaluates it), and in a regulariser built in `__init__` as a
closure (evaluated from an end-of-epoch callback).
"""

import functools

import torch
import torch.nn.functional as F
from torch import nn


class BagOfWords(nn.Module):
    def __init__(self, vocabulary: int = 100, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, 32)
        self.fc = nn.Linear(32, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        features = F.dropout(self.embedding(tokens), 0.5)  # expect: TD506
        return self.fc(features)


class TwoLayer(nn.Module):
    def __init__(self, vocabulary: int = 100, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, 32)
        self.hidden = nn.Linear(32, 32)
        self.fc = nn.Linear(32, classes)

    def regularise(self, features: torch.Tensor) -> torch.Tensor:
        return F.dropout(features, p=0.3)  # expect: TD506

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        features = self.regularise(torch.relu(self.hidden(self.embedding(tokens))))
        return self.fc(features)


class Gated(nn.Module):
    def __init__(self, vocabulary: int = 100, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, 32)
        self.fc = nn.Linear(32, classes)
        self.drop = functools.partial(F.alpha_dropout, p=0.2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        features = self.embedding(tokens)
        features = self.drop(features)  # expect[run]: TD506
        return self.fc(features)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, 100, (64, 12))
    return tokens, tokens[:, 0] % 4


def accuracy(model: nn.Module, steps: int = 30) -> float:
    tokens, labels = batch()
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


class Trainer:
    def __init__(self, model: nn.Module, callbacks: list = ()) -> None:
        self.model, self.callbacks = model, list(callbacks)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def _step(self, tokens: torch.Tensor, labels: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        F.cross_entropy(self.model(tokens), labels).backward()
        self.optimizer.step()

    def _evaluate(self) -> float:
        self.model.eval()
        tokens, labels = batch()
        with torch.no_grad():
            return F.cross_entropy(self.model(tokens), labels).item()

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.model.train()
            for _ in range(10):
                self._step(*batch())
            for callback in self.callbacks:
                callback(self, epoch)


def report_validation(trainer: Trainer, epoch: int) -> None:
    print(f"epoch {epoch} validation loss {trainer._evaluate():.3f}")


def main() -> None:
    torch.manual_seed(0)
    print(f"accuracy: {accuracy(BagOfWords()):.2f}")
    Trainer(TwoLayer(), callbacks=[report_validation]).fit(2)
    Trainer(Gated(), callbacks=[report_validation]).fit(2)


if __name__ == "__main__":
    main()
