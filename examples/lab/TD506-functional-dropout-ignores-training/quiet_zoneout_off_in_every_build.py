"""A recurrent cell with optional zoneout that every network of the program turns off.

The cell keeps its zoneout rate from its constructor and runs the functional dropout
only when the rate is above 0. Each cell the program builds passes `zoneout=0.0`, so the
branch never runs, in training or in evaluation: there is no dropout to leave on after
`model.eval()`.
"""

import torch
import torch.nn.functional as F
from torch import nn


class ZoneoutGRUCell(nn.Module):
    def __init__(self, size: int, zoneout: float = 0.0) -> None:
        super().__init__()
        self.cell = nn.GRUCell(size, size)
        self._zoneout = zoneout

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        new_h = self.cell(x, h)
        if self._zoneout > 0.0:
            keep = F.dropout(torch.ones_like(h), p=self._zoneout) > 0
            new_h = torch.where(keep, new_h, h)
        return new_h


class Forecaster(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.encoder = ZoneoutGRUCell(size, zoneout=0.0)
        self.decoder = ZoneoutGRUCell(size, zoneout=0.0)
        self.head = nn.Linear(size, size)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        h = torch.zeros_like(frames[0])
        for frame in frames:
            h = self.encoder(frame, h)
        return self.head(self.decoder(frames[-1], h))


def main() -> None:
    torch.manual_seed(0)
    model = Forecaster(8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    frames, target = torch.randn(5, 32, 8), torch.randn(32, 8)
    for _ in range(20):
        optimizer.zero_grad()
        loss = F.mse_loss(model(frames), target)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        print(round(F.mse_loss(model(frames), target).item(), 3))


if __name__ == "__main__":
    main()
