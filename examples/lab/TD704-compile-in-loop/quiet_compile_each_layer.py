"""A matcher that compiles each of its transformer layers once, in a loop over the layers.

`self.layers[i].forward` names a different layer's method on every iteration, so each is
compiled exactly once; nothing compiled is compiled again.
"""

import torch
from torch import nn


class Matcher(nn.Module):
    def __init__(self, n_layers: int = 3, dim: int = 16) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))

    def compile_layers(self) -> None:
        for i in range(len(self.layers)):
            self.layers[i].forward = torch.compile(self.layers[i].forward)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


if __name__ == "__main__":
    matcher = Matcher()
    matcher.compile_layers()
    print(matcher(torch.randn(2, 16)).shape)
