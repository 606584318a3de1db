"""Three text classifiers whose functional dropout follows the module's mode.

Passing `training=self.training` turns dropout off after `model.eval()`, in `forward`,
in a helper method and in a regulariser built in `__init__` alike. A Monte-Carlo estimate
that keeps dropout on during evaluation on purpose says so with `training=True`.
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
        features = F.dropout(self.embedding(tokens), 0.5, training=self.training)
        return self.fc(features)

    def sample(self, tokens: torch.Tensor) -> torch.Tensor:
        """One Monte-Carlo draw: dropout stays on by intent, also in eval mode."""
        return self.fc(F.dropout(self.embedding(tokens), 0.5, training=True))


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


class Gated(nn.Module):
    def __init__(self, vocabulary: int = 100, classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocabulary, 32)
        self.fc = nn.Linear(32, classes)
        self.drop = functools.partial(F.alpha_dropout, p=0.2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        features = self.embedding(tokens)
        features = self.drop(features, training=self.training)
        return self.fc(features)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, 100, (64, 12))
    return tokens, tokens[:, 0] % 4


def accuracy(model: BagOfWords, steps: int = 30) -> float:
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
        mean = torch.stack([model.sample(tokens).softmax(1) for _ in range(4)]).mean(0)
        print(f"Monte-Carlo accuracy: {(mean.argmax(1) == labels).float().mean().item():.2f}")
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
