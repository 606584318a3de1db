"""Saves a loss curve every epoch and closes each figure once it is written.

`plt.close(fig)` after `savefig` releases the figure, so memory stays flat however
long the run.
"""

import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless, as on a training server

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

EPOCHS = 25


def make_data(n: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 10)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return x, y


def main() -> None:
    torch.manual_seed(0)
    out_dir = Path(tempfile.mkdtemp(prefix="td701-"))
    x, y = make_data()
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    history: list[float] = []
    for epoch in range(EPOCHS):
        for start in range(0, len(x), 64):
            optimizer.zero_grad()
            loss = criterion(model(x[start:start + 64]), y[start:start + 64])
            loss.backward()
            optimizer.step()
        history.append(loss.item())
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot(history)
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss")
        ax.set_title(f"after epoch {epoch}")
        fig.savefig(out_dir / "loss.png")
        plt.close(fig)  # pyplot would keep it alive otherwise
    print(f"final loss {history[-1]:.3f}; figures still open: {len(plt.get_fignums())}")


if __name__ == "__main__":
    main()
