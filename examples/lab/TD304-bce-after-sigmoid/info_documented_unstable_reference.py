"""A loss library that offers the explicit sigmoid-then-BCE form as a reference, beside
the fused `binary_cross_entropy_with_logits`, and says in its docstring that it is the
numerically unstable one.

The finding is true (a saturated sigmoid clamps the loss and its gradient), but the
author keeps the form on purpose, for comparison: information, not a warning.
"""

import torch
import torch.nn.functional as F
from torch import nn


class BCEWithLogits(nn.Module):
    """Binary cross entropy on logits: the stable form."""

    def forward(self, scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(scores, target)


class BCEAfterSigmoid(nn.Module):
    """The numerically unstable reference: an explicit sigmoid, then binary cross
    entropy. Kept to compare against `BCEWithLogits`."""

    def forward(self, scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy(scores.sigmoid(), target)  # expect: TD304


if __name__ == "__main__":
    torch.manual_seed(0)
    scores, target = torch.randn(64) * 3, torch.randint(0, 2, (64,)).float()
    print(f"{BCEWithLogits()(scores, target):.4f} {BCEAfterSigmoid()(scores, target):.4f}")
