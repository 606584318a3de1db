"""Sequence models whose recurrent layers are sequence-first while their data is batch-first.

The inputs are (batch, seq, features), but `nn.LSTM`, `nn.GRU` and `nn.RNN` are built
without `batch_first=True`: each runs its recurrence along the batch, so every example's
state starts from the previous example's, and the head of the first model, which takes
`out[:, -1, :]`, reads the last sample of the batch at every time step. The loss goes
down far more slowly than it should, and nothing raises. The same mistake is made three
ways: a plain loop, a trainer whose step lives in helpers, and a closure handed to
`optimizer.step()`.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SEQ, FEATURES, CLASSES, BATCH = 10, 6, 3, 16


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, 32, 1)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)  # expect[check,run]: TD109
        return self.head(out[:, -1, :])  # expect[lint]: TD109


def make():
    """What `check` takes: the classifier, a batch-first batch of 16 sequences, the loss."""
    torch.manual_seed(0)
    inputs = torch.randn(16, SEQ, FEATURES)
    targets = (inputs[:, -1, 0] > 0).long() + (inputs[:, 0, 1] > 0).long()
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, (inputs, targets), nn.CrossEntropyLoss(), optimizer


def train_plain() -> float:
    inputs = torch.randn(BATCH, SEQ, FEATURES)
    targets = (inputs[:, -1, 0] > 0).long() + (inputs[:, 0, 1] > 0).long()
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = torch.zeros(())
    for _ in range(20):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.GRU(FEATURES, 24, 2)
        self.head = nn.Linear(24, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        states, _ = self.encoder(x)  # expect[run]: TD109
        return self.head(states.amax(dim=1))


class Trainer:
    def __init__(self) -> None:
        self.model = Regressor()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        series = torch.randn(96, SEQ, FEATURES)
        data = TensorDataset(series, series[:, :, :1].sum(1))
        self.loader = DataLoader(data, batch_size=24, shuffle=True)

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.model(x), y)

    def _step(self, batch: list[torch.Tensor]) -> float:
        self.optimizer.zero_grad()
        loss = self._loss(*batch)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, epochs: int = 3) -> float:
        return [self._step(batch) for _ in range(epochs) for batch in self.loader][-1]


def train_with_closure() -> float:
    rnn = nn.RNN(FEATURES, 16, 1, nonlinearity="tanh")
    head = nn.Linear(16, 2)
    optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
    inputs = torch.randn(12, SEQ, FEATURES)
    labels = (inputs.mean((1, 2)) > 0).long()

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        out, _ = rnn(inputs)  # expect[run]: TD109
        loss = nn.functional.cross_entropy(head(out.mean(dim=1)), labels)
        loss.backward()
        return loss.detach()

    return [float(optimizer.step(closure)) for _ in range(10)][-1]


def main() -> None:
    torch.manual_seed(0)
    print(f"plain {train_plain():.4f}  trainer {Trainer().fit():.4f}")
    print(f"closure {train_with_closure():.4f}")


if __name__ == "__main__":
    main()
