"""The segmentation head of buggy_requires_grad_hack.py, with the loss kept in torch.

The soft Dice loss is computed from the model's output with tensor operations, so it
requires grad through the model, the backward reaches every parameter and the loss falls.
"""

import numpy as np
import torch
from torch import nn


def dice_loss(logits: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    probs = torch.sigmoid(logits)
    dice = (2 * (probs * masks).sum() + 1) / (probs.sum() + masks.sum() + 1)
    return 1.0 - dice


def main() -> None:
    torch.manual_seed(0)
    images = torch.randn(256, 1, 8, 8)
    masks = (images > 0.5).float()
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for i in range(0, len(images), 32):
            loss = dice_loss(model(images[i : i + 32]), masks[i : i + 32])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: dice loss {loss.item():.4f} ({np.float32(loss.item()):.4f})")


if __name__ == "__main__":
    main()
