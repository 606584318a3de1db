"""Relative-position attention whose bias vectors are declared with ``torch.Tensor``,
initialised by the training script's loop over every parameter of the model.

`u` and `v` hold uninitialised memory when the layer is built, but right after building
the model the script draws every parameter that is not a bias and has more than one
dimension from a Xavier distribution; `u` and `v` are two-dimensional and their names
pass the filter. Nothing reads the raw memory; the legacy constructor is still worth
replacing by ``torch.empty``.
"""

import torch
from torch import nn

HEADS, HEAD_SIZE = 4, 8


class RelativeAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(HEADS * HEAD_SIZE, HEADS * HEAD_SIZE)
        self.u = nn.Parameter(torch.Tensor(HEADS, HEAD_SIZE))  # expect: TD105
        self.v = nn.Parameter(torch.Tensor(HEADS, HEAD_SIZE))  # expect: TD105

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.query(x).view(*x.shape[:-1], HEADS, HEAD_SIZE)
        return ((q + self.u) * (q + self.v)).flatten(-2)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(RelativeAttention(), nn.Linear(HEADS * HEAD_SIZE, 2))
    for name, parameter in model.named_parameters():
        if "bias" not in name and parameter.dim() > 1:
            nn.init.xavier_uniform_(parameter)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, HEADS * HEAD_SIZE), torch.randint(0, 2, (64,))
    for _ in range(20):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss)
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
