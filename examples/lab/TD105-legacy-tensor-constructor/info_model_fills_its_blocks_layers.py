"""A traffic-forecasting model whose attention layers allocate their weights with
`torch.FloatTensor` and leave them unfilled.

The model builds blocks, the blocks build the attention layers, and the model's own
`_init_parameters()` then draws every parameter of `self`, the layers two levels down
included: nothing reads the raw memory. Only the legacy spelling is left to change.
"""

import torch
from torch import nn


class SpatialAttention(nn.Module):
    def __init__(self, nodes: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.FloatTensor(nodes, nodes))  # expect: TD105
        self.b = nn.Parameter(torch.FloatTensor(nodes))  # expect: TD105

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ self.w + self.b, dim=-1)


class Block(nn.Module):
    def __init__(self, nodes: int) -> None:
        super().__init__()
        self.attention = SpatialAttention(nodes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x)


class Model(nn.Module):
    def __init__(self, nodes: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(nodes) for _ in range(depth)])
        self._init_parameters()

    def _init_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            else:
                nn.init.uniform_(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def main() -> None:
    torch.manual_seed(0)
    model = Model(nodes=5, depth=2)
    out = model(torch.randn(3, 5))
    assert torch.isfinite(out).all()
    print(out.sum().item())


if __name__ == "__main__":
    main()
