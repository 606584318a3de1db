"""Fine-tuning from a checkpoint whose keys are compared with the model's by hand.

Before `load_state_dict(..., strict=False)`, the loader prints every checkpoint key the
model lacks and every model key the checkpoint lacks: the keys `strict=False` skips are
on screen, not thrown away silently.
"""

import tempfile
from pathlib import Path

import torch
from torch import nn


def restore(model: nn.Module, path: Path) -> None:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    for key in checkpoint.keys():
        if key not in model.state_dict().keys():
            print(f"key {key} not in the model")
    for key in model.state_dict().keys():
        if key not in checkpoint:
            print(f"key {key} not in the checkpoint")
    model.load_state_dict(checkpoint, strict=False)


def main() -> None:
    torch.manual_seed(0)
    pretrained = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
    path = Path(tempfile.gettempdir()) / "td904-keys-checked.pt"
    torch.save(pretrained.state_dict(), path)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4), nn.Linear(4, 2))
    restore(model, path)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, labels = torch.randn(64, 6), torch.randint(0, 2, (64,))
    for _ in range(5):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
