"""Migrates the old checkpoints to the new names once, then loads them strictly.

`torchdoctor ckpt old.pt --model fixed.py:make_model --write-remapped new.pt` proposes and
writes the same renaming; in code it is a dictionary comprehension over the keys.
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


def migrate(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename the pre-refactor keys: backbone.* -> encoder.*."""
    return {("encoder." + key.removeprefix("backbone.") if key.startswith("backbone.")
             else key): value for key, value in state.items()}


def save_checkpoint(path: str) -> None:
    """The checkpoint on disk after the one-off migration."""
    torch.manual_seed(0)
    model = LegacyNet()
    train(model)
    torch.save(migrate(model.state_dict()), path)


def main() -> None:
    path = os.path.join(tempfile.gettempdir(), "td910-migrated.pt")
    save_checkpoint(path)
    model = make_model()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    print("loaded with strict=True")


if __name__ == "__main__":
    main()
