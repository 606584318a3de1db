"""Gradient accumulation: four micro-batches per optimizer step, `(i + 1) % k == 0` style.

The loss is divided by the number of accumulated micro-batches, so the summed gradient is
the gradient of the mean loss. Gradients are cleared once before training and right after
every step, and the last partial window of an epoch is applied too.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATE = 4
FEATURES = 16
CLASSES = 4


def build_data(size: int = 224) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(size, FEATURES, generator=generator)
    projection = torch.randn(FEATURES, CLASSES, generator=generator)
    return TensorDataset(inputs, (inputs @ projection).argmax(dim=1))


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def make():
    torch.manual_seed(0)
    model = build_model()
    inputs, labels = build_data(64).tensors
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    return model, (inputs, labels), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(build_data(), batch_size=16, shuffle=True)
    model = build_model()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    model.train()
    optimizer.zero_grad()
    for epoch in range(3):
        running = 0.0
        for i, (inputs, labels) in enumerate(loader):
            loss = criterion(model(inputs), labels) / ACCUMULATE
            loss.backward()
            running += loss.item() * ACCUMULATE
            if (i + 1) % ACCUMULATE == 0 or (i + 1) == len(loader):
                optimizer.step()
                optimizer.zero_grad()
        print(f"epoch {epoch}: mean loss {running / len(loader):.4f}")


if __name__ == "__main__":
    main()
