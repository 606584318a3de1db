"""Fine-tunes from a pretrained checkpoint and checks what `strict=False` skipped.

The checkpoint's `encoder.*` keys are renamed to the classifier's `backbone.*`, and the
result of `load_state_dict(..., strict=False)` is checked: the only keys allowed to be
missing are the new head's, and nothing may be left over.
"""

import tempfile
from pathlib import Path

import torch
from torch import nn


def make_data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 8)
    y = (x[:, 0] * x[:, 1] > 0).long()  # not linearly separable: needs good features
    return x, y


class Pretrained(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.decoder = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        batch = torch.randint(0, len(x), (64,))
        optimizer.zero_grad()
        loss = criterion(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()


def pretrain(path: Path) -> None:
    x, y = make_data(4096)
    model = Pretrained()
    train(model, x, y, steps=150)
    torch.save(model.state_dict(), path)


def main() -> None:
    torch.manual_seed(0)
    path = Path(tempfile.mkdtemp(prefix="td904-")) / "pretrained.pt"
    pretrain(path)
    model = Classifier()
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = {k.replace("encoder.", "backbone.", 1): v for k, v in state.items()
             if k.startswith("encoder.")}
    result = model.load_state_dict(state, strict=False)
    if set(result.missing_keys) != {"head.weight", "head.bias"} or result.unexpected_keys:
        raise RuntimeError(f"checkpoint does not fit the backbone: {result}")
    model.backbone.requires_grad_(False)  # linear probe: train the new head only
    x, y = make_data(2048)
    train(model, x, y, steps=100)
    x_test, y_test = make_data(1024)
    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean()
    print(f"probe accuracy {accuracy.item():.3f}")


if __name__ == "__main__":
    main()
