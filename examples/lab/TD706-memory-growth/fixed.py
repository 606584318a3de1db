"""Fixed: each step keeps only its count of correct predictions (a Python int)."""

import torch
from torch import nn

FEATURES, CLASSES = 64, 1000


def main() -> None:
    torch.manual_seed(0)
    weights = torch.randn(FEATURES, CLASSES)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    correct = seen = 0
    for _ in range(160):
        x = torch.randn(256, FEATURES)
        y = (x @ weights).argmax(dim=1)
        optimizer.zero_grad()
        logits = model(x)
        nn.functional.cross_entropy(logits, y).backward()
        optimizer.step()
        correct += (logits.argmax(dim=1) == y).sum().item()
        seen += len(y)
    print(f"training accuracy over the run: {correct / seen:.3f}")


if __name__ == "__main__":
    main()
