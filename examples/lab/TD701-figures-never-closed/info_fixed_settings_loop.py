"""A comparison script: one short training run per learning rate of a fixed list, and a
figure of each run's loss curve.

The figures are never closed, but the loop iterates a list of four settings written in
the code, so at most four figures stay open: true, and a maintainer leaves it.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

LEARNING_RATES = [0.3, 0.1, 0.03, 0.01]


def train(lr: float) -> list[float]:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    inputs = torch.randn(64, 4)
    targets = inputs.sum(dim=1, keepdim=True)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    for lr in LEARNING_RATES:
        curve = train(lr)
        plt.figure()  # expect: TD701
        plt.plot(curve)
        plt.title(f"lr={lr}")
        plt.savefig(f"loss_lr{lr}.png")
