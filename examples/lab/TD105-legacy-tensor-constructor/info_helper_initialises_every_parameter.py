"""A Q-network whose parameters are built with the legacy constructor and initialised by
a helper of the file, defined below the class, that loops over every parameter.

`weights_init(self)` at the end of `__init__` hands each top-level parameter to a glorot
fill: nothing reads the uninitialised memory. Only the spelling is legacy.
"""

import numpy as np
import torch
from torch import nn
from torch.nn.parameter import Parameter


class QNet(nn.Module):
    def __init__(self, features: int, embed: int) -> None:
        super().__init__()
        self.w_n2l = Parameter(torch.Tensor(features, embed))  # expect: TD105
        self.bias_n2l = Parameter(torch.Tensor(embed))  # expect: TD105
        self.out = nn.Linear(embed, 1)
        weights_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(x @ self.w_n2l + self.bias_n2l))


def glorot_uniform(t: torch.Tensor) -> None:
    fan = np.prod(t.size()) if t.dim() < 2 else t.size(0) + t.size(1)
    limit = np.sqrt(6.0 / fan)
    t.uniform_(-limit, limit)


def _param_init(p: torch.Tensor) -> None:
    glorot_uniform(p.data)


def weights_init(m: nn.Module) -> None:
    for name, p in m.named_parameters():
        if "." not in name:  # top-level parameters
            _param_init(p)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(QNet(6, 4)(torch.randn(2, 6)).shape)
