"""Fixed: the logits come straight from the last Linear layer (the loss applies the
softmax), and the learning rate is one a plain classifier can take."""

import torch
from torch import nn

FEATURES, CLASSES = 20, 10


def make_batch(weights: torch.Tensor, size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(size, FEATURES)
    return x, (x @ weights).argmax(dim=1)


def main() -> None:
    torch.manual_seed(0)
    weights = torch.randn(FEATURES, CLASSES)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(120):
        x, y = make_batch(weights)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
