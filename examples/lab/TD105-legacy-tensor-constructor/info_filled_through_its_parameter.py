"""A spectral layer whose weights are allocated with `torch.FloatTensor` and filled at once.

Each weight is allocated uninitialised, wrapped as an `nn.Parameter` (which shares its
memory) and filled by `xavier_normal_` through the parameter on the next line. Nothing
reads the memory before it is written: only the legacy spelling is left to change.
"""

import torch
from torch import nn


class SpectralWeights(nn.Module):
    def __init__(self, dim: int, modes: int) -> None:
        super().__init__()
        self.weights = nn.ParameterList([])
        for _ in range(2):
            weight = torch.FloatTensor(dim, dim, modes, 2)  # expect: TD105
            param = nn.Parameter(weight)
            nn.init.xavier_normal_(param)
            self.weights.append(param)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernel = torch.view_as_complex(self.weights[0]).real.sum(-1)
        return x @ kernel


def main() -> None:
    torch.manual_seed(0)
    layer = SpectralWeights(dim=4, modes=3)
    with torch.no_grad():
        print("output norm:", layer(torch.randn(2, 4)).norm().item())


if __name__ == "__main__":
    main()
