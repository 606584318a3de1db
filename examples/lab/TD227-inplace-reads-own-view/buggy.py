"""Pose evaluation that centres each predicted skeleton on its root joint in place.

`poses -= poses[:, :1]` means "subtract the root joint from every joint", but the root is a
view of `poses`: torch zeroes it first, and the other joints then subtract zero. The error
is computed on uncentred poses and comes out far too large.
"""

import torch
from torch import nn

JOINTS = 8


def evaluate(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    with torch.no_grad():
        poses = model(inputs).view(-1, JOINTS, 3).cpu()
        poses -= poses[:, :1]  # expect: TD227
    return (poses - targets).norm(dim=-1).mean().item()


def main() -> None:
    torch.manual_seed(0)
    targets = torch.randn(64, JOINTS, 3)
    targets = targets - targets[:, :1]  # ground truth centred on the root
    inputs = (targets + 5.0).flatten(1)  # the network sees uncentred poses
    model = nn.Linear(JOINTS * 3, JOINTS * 3)
    with torch.no_grad():
        model.weight.copy_(torch.eye(JOINTS * 3))
        model.bias.zero_()
    print(f"mean joint error after centring: {evaluate(model, inputs, targets):.3f}")


if __name__ == "__main__":
    main()
