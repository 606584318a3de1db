"""An evaluation script that sets both cuDNN flags and takes no training step.

It imports `torch.optim` (left over from the training script it was copied from) and
defines an autograd function with its own `backward`, but it only evaluates: without a
training step, benchmarking can change at most the last digits of its outputs, which a
maintainer leaves. The finding is information, not a warning.
"""

import torch
import torch.optim as optim  # unused, copied from the training script
from torch import nn


class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def evaluate() -> float:
    torch.backends.cudnn.benchmark = True  # expect: TD705
    torch.backends.cudnn.deterministic = True
    model = nn.Sequential(nn.Conv1d(2, 4, 3), nn.Flatten(), nn.Linear(24, 1)).eval()
    with torch.no_grad():
        return Clamp.apply(model(torch.randn(8, 2, 8))).mean().item()


if __name__ == "__main__":
    print(f"mean output {evaluate():.3f}")
