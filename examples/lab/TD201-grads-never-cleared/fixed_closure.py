"""The L-BFGS closure fixed: it clears the gradients before each evaluation, as
PyTorch's closure contract asks."""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.rand(256, 2) * 4 - 2
    targets = torch.sin(inputs[:, :1]) * torch.cos(inputs[:, 1:])
    net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=10)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(net(inputs), targets)
        loss.backward()
        return loss

    for outer in range(5):
        loss = optimizer.step(closure)
        print(f"outer {outer}: mse {loss.item():.5f}")


if __name__ == "__main__":
    main()
