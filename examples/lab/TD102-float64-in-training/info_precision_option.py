"""An implicit-representation trainer with a float64 switch the user turns on by hand.

The coordinates go through the network in float32 unless the caller passes
`double_precision=True` (useful when fitting a signal to very low error): the float64 is
what the user asked for, so it is information, not a warning. The switch is on here to
show the finding; the default is off.
"""

import torch
from torch import nn


class Siren(nn.Module):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.first = nn.Linear(2, hidden)
        self.last = nn.Linear(hidden, 1)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        return self.last(torch.sin(30.0 * self.first(coords)))


def fit(model: nn.Module, steps: int, double_precision: bool = False) -> float:
    grid = torch.linspace(-1, 1, 32)
    coords = torch.stack(torch.meshgrid(grid, grid, indexing="ij"), dim=-1).reshape(-1, 2)
    signal = torch.sin(3 * coords[:, :1]) * torch.cos(2 * coords[:, 1:])
    if double_precision:
        model = model.double()  # expect: TD102
        coords, signal = coords.double(), signal.double()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss = torch.zeros(())
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(coords), signal)
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    print(f"final loss {fit(Siren(), steps=50, double_precision=True):.6f}")


if __name__ == "__main__":
    main()
