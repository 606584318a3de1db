"""A classifier trained with an activation monitor registered as a forward hook.

The loop calls `model.forward(x)` instead of `model(x)`, so the hook never runs: the
monitor silently records nothing, and the report at the end is empty.
"""

import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ActivationMonitor:
    """Keeps the spread of the logits of every batch, to spot saturation early."""

    def __init__(self) -> None:
        self.spreads: list[float] = []

    def __call__(self, module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        self.spreads.append(output.detach().std().item())


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(640, 10)
    y = (x[:, 0] + x[:, 1] > 0).long()
    model = Classifier()
    monitor = ActivationMonitor()
    model.register_forward_hook(monitor)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    batches = 0
    for epoch in range(4):
        for start in range(0, 640, 64):
            optimizer.zero_grad()
            logits = model.forward(x[start:start + 64])  # expect: TD206
            loss = criterion(logits, y[start:start + 64])
            loss.backward()
            optimizer.step()
            batches += 1
    print(f"monitor saw {len(monitor.spreads)} of {batches} batches")


if __name__ == "__main__":
    main()
