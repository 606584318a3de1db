"""A best-model saver that reuses one name for each part it writes.

When the validation loss improves, the trainer saves the parts it is asked for, each under
its own `if`, through `state_dict = <part>.state_dict()` followed at once by `torch.save`.
Each save reads the value bound just before it in the same pass: no snapshot outlives the
step that took it, so no stale weights are ever written.
"""

import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.encoder(x)))


def main(parts: tuple[str, ...] = ("encoder", "head")) -> None:
    torch.manual_seed(0)
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    x = torch.randn(128, 8)
    y = x.sum(dim=1, keepdim=True)
    best = float("inf")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        for epoch in range(5):
            for start in range(0, 128, 32):
                optimizer.zero_grad()
                F.mse_loss(net(x[start : start + 32]), y[start : start + 32]).backward()
                optimizer.step()
            with torch.no_grad():
                loss = F.mse_loss(net(x), y).item()
            if loss < best:
                best = loss
                if "encoder" in parts:
                    state_dict = net.encoder.state_dict()
                    torch.save(state_dict, out / "encoder.pt")
                if "head" in parts:
                    state_dict = net.head.state_dict()
                    torch.save(state_dict, out / "head.pt")
        print(round(best, 4), sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main()
