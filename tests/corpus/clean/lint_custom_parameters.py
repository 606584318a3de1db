"""A layer with hand-made parameters, initialised right after they are allocated."""

import math

import torch
from torch import nn


class GraphConvolution(nn.Module):
    def __init__(self, features_in: int, features_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features_in, features_out))
        nn.init.xavier_uniform_(self.weight)
        self.bias = nn.Parameter(torch.Tensor(features_out))
        self.reset_bias()

    def reset_bias(self) -> None:
        bound = 1 / math.sqrt(self.weight.size(0))
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        return adjacency @ (x @ self.weight) + self.bias


def main() -> None:
    torch.manual_seed(0)
    layer = GraphConvolution(5, 2)
    nodes = torch.randn(10, 5)
    adjacency = (torch.rand(10, 10) > 0.7).float()
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2)
    for _ in range(10):
        optimizer.zero_grad()
        layer(nodes, adjacency).pow(2).mean().backward()
        optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
