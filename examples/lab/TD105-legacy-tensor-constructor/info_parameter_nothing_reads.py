"""A gating layer that builds a third weight with uninitialised memory and never uses it.

Two weights are made with ``torch.empty`` and filled with ``xavier_uniform_``;
``ii_w``, left over from an earlier version of the layer, is allocated with the legacy
``torch.Tensor(d, d)`` and no line of the program reads it. The memory is
uninitialised, but nothing computes with it: the spelling (and the dead parameter) is
all there is to clean up.
"""

import torch
from torch import nn


class BehaviourGate(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.i_w = nn.Parameter(torch.empty(d, d))
        self.u_w = nn.Parameter(torch.empty(d, d))
        self.ii_w = nn.Parameter(torch.Tensor(d, d))  # expect: TD105
        nn.init.xavier_uniform_(self.i_w)
        nn.init.xavier_uniform_(self.u_w)

    def forward(self, items: torch.Tensor, users: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid((items @ self.i_w) * (users @ self.u_w)).sum(-1)


def main() -> None:
    torch.manual_seed(0)
    gate = BehaviourGate(8)
    with torch.no_grad():
        scores = gate(torch.randn(4, 8), torch.randn(4, 8))
    print("scores:", [round(s, 3) for s in scores.tolist()])


if __name__ == "__main__":
    main()
