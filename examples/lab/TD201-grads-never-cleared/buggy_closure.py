"""A full-batch L-BFGS fit whose closure never clears the gradients.

L-BFGS calls the closure several times within one ``step()`` (line search and inner
iterations); each call's ``backward()`` adds into ``.grad``, so every evaluation after the
first sees the sum of all the gradients so far, and the fit goes astray.
"""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.rand(256, 2) * 4 - 2
    targets = torch.sin(inputs[:, :1]) * torch.cos(inputs[:, 1:])
    net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=10)

    def closure() -> torch.Tensor:
        loss = nn.functional.mse_loss(net(inputs), targets)
        loss.backward()
        return loss

    for outer in range(5):
        loss = optimizer.step(closure)  # expect[lint]: TD201
        print(f"outer {outer}: mse {loss.item():.5f}")


if __name__ == "__main__":
    main()
