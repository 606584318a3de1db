"""Small, correct, realistic training setups shared by the check integration tests.

Each builder returns ``(model, data, loss_fn, optimizer)`` as ``torch.check`` takes them:
a model written the way tutorials and real projects write it, synthetic data in the
shape and scale real data has, the loss and optimizer such a model is trained with.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    """A tabular classifier: standardised features, two hidden layers."""

    def __init__(self, features: int = 20, classes: int = 5) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, 64),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    """An image classifier with BatchNorm and dropout, for 3x32x32 images."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.dropout = nn.Dropout(0.3)
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(self.features(x).flatten(1)))


class TinyTransformer(nn.Module):
    """A sequence classifier: token and position embeddings, a Transformer encoder."""

    def __init__(self, vocab: int = 100, classes: int = 4, dim: int = 32, length: int = 16) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(length, dim)
        layer = nn.TransformerEncoderLayer(
            dim, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        hidden = self.encoder(self.tokens(ids) + self.positions(positions))
        return self.head(hidden.mean(dim=1))


class LSTMClassifier(nn.Module):
    """A sequence classifier over embedded tokens with a 2-layer LSTM."""

    def __init__(self, vocab: int = 100, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 24, padding_idx=0)
        self.lstm = nn.LSTM(24, 32, num_layers=2, batch_first=True, dropout=0.1)
        self.head = nn.Linear(32, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        output, _ = self.lstm(self.embed(ids))
        return self.head(output[:, -1])


def mlp_setup() -> tuple[Any, ...]:
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(64, 20)
    y = torch.randint(0, 5, (64,))
    return model, (x, y), nn.CrossEntropyLoss(), torch.optim.AdamW(model.parameters(), 1e-3)


def cnn_setup() -> tuple[Any, ...]:
    torch.manual_seed(0)
    model = SmallCNN()
    images = torch.rand(256, 3, 32, 32)
    images = (images - 0.5) / 0.25
    labels = torch.randint(0, 10, (256,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    return model, loader, nn.CrossEntropyLoss(label_smoothing=0.1), optimizer


def transformer_setup() -> tuple[Any, ...]:
    torch.manual_seed(0)
    model = TinyTransformer()
    ids = torch.randint(0, 100, (32, 16))
    labels = torch.randint(0, 4, (32,))
    return model, (ids, labels), nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), 3e-4)


def lstm_setup() -> tuple[Any, ...]:
    torch.manual_seed(0)
    model = LSTMClassifier()
    ids = torch.randint(1, 100, (32, 12))
    labels = torch.randint(0, 3, (32,))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    return model, {"inputs": ids, "labels": labels}, nn.CrossEntropyLoss(), optimizer


SETUPS = {"mlp": mlp_setup, "cnn": cnn_setup, "transformer": transformer_setup, "lstm": lstm_setup}
