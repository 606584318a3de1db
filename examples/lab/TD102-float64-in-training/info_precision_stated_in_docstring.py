"""Bound optimisation whose last refinement runs in float64, as its docstring says why.

The slopes of a relaxation are optimised in float32; the final pass that computes the
certified bound moves the network to float64, because rounding in float32 loosens the
bound. The cost (twice the memory, slower kernels) is paid once, on purpose, and the
docstring says so.
"""

import torch
from torch import nn


def refine_in_float64(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Compute the final bound in float64 to limit floating point error."""
    model = model.double()  # expect: TD102
    with torch.no_grad():
        return model(x.to(model[0].weight.dtype)).min(dim=1).values


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    slopes = torch.zeros(8, requires_grad=True)
    optimizer = torch.optim.Adam([slopes], lr=0.1)
    x = torch.randn(16, 4)
    for step in range(5):
        hidden = model[1](model[0](x)) * torch.sigmoid(slopes)
        bound = model[2](hidden).min(dim=1).values.mean()
        optimizer.zero_grad()
        (-bound).backward()
        optimizer.step()
        print(f"step {step}: bound {bound.item():.4f}")
    print("final bound:", refine_in_float64(model, x).mean().item())


if __name__ == "__main__":
    main()
