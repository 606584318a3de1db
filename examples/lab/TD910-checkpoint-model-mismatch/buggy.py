"""A refactor renamed the model's `backbone` to `encoder`; the old checkpoints still use it.

`load_state_dict(strict=True)` fails with 'Missing key(s) in state_dict: "encoder.0.weight"
... Unexpected key(s) in state_dict: "backbone.0.weight" ...'. The common escape,
`strict=False`, "works": it loads the head and leaves the whole encoder at its random
initialisation, and the model's accuracy drops to chance with no error.
"""

import os
import tempfile

import torch
from torch import nn


class LegacyNet(nn.Module):
    """The model as it was when the checkpoints were trained."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class Net(nn.Module):
    """The model today: same layers, `backbone` renamed to `encoder`."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def make_model() -> nn.Module:
    return Net()


def train(model: nn.Module, steps: int = 30) -> None:
    inputs = torch.randn(256, 20)
    targets = inputs[:, :5].argmax(dim=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()


def save_checkpoint(path: str) -> None:
    """The checkpoint on disk, trained before the refactor."""
    torch.manual_seed(0)
    model = LegacyNet()
    train(model)
    torch.save(model.state_dict(), path)


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td910-legacy.pt")
    save_checkpoint(path)
    model = make_model()
    result = model.load_state_dict(
        torch.load(path, map_location="cpu", weights_only=True), strict=False)
    print(f"loaded with {len(result.missing_keys)} keys left random")


if __name__ == "__main__":
    main()
