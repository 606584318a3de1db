"""A segmentation head trained on a loss rebuilt from numbers, made to require grad by hand.

The soft Dice score is computed in NumPy for logging convenience and turned back into a
tensor; `backward()` then failed with "element 0 of tensors does not require grad", and
`loss.requires_grad_()` silenced it. The loss is now a leaf of its own: the backward
reaches no parameter, the optimizer never moves the model, and the loss stays flat.
"""

import numpy as np
import torch
from torch import nn


def dice_loss(logits: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    probs = torch.sigmoid(logits).detach().numpy()
    target = masks.numpy()
    dice = (2 * (probs * target).sum() + 1) / (probs.sum() + target.sum() + 1)
    return torch.tensor(1.0 - dice, dtype=torch.float32)


def main() -> None:
    torch.manual_seed(0)
    images = torch.randn(256, 1, 8, 8)
    masks = (images > 0.5).float()
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for i in range(0, len(images), 32):
            loss = dice_loss(model(images[i : i + 32]), masks[i : i + 32])
            loss.requires_grad_()  # expect[lint]: TD209
            optimizer.zero_grad()
            loss.backward()  # expect[run]: TD209
            optimizer.step()
        print(f"epoch {epoch}: dice loss {loss.item():.4f} ({np.float32(loss.item()):.4f})")


if __name__ == "__main__":
    main()
