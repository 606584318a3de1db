"""Figures left open by plotting code that runs once, after training.

The trainer's helper draws one figure per metric when training is over, and a callback
draws one per output unit at the end: a handful of figures, held until the program ends.
True (nothing closes them), but not the per-epoch leak of a training loop: information.
"""

import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless, as on a training server

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


class WeightsAtTheEnd:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    def on_train_end(self, model: nn.Linear) -> None:
        for unit, weights in enumerate(model.weight.detach()):
            plt.figure(figsize=(3, 2))  # expect: TD701
            plt.bar(range(len(weights)), weights.tolist())
            plt.savefig(self.out_dir / f"unit{unit}.png")


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Linear(6, 2)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.metrics: dict[str, list[float]] = {"loss": [], "weight norm": []}
        self.out_dir = Path(tempfile.mkdtemp(prefix="td701-info-"))
        self.callbacks = [WeightsAtTheEnd(self.out_dir)]

    def train_epoch(self) -> float:
        x = torch.randn(128, 6)
        loss = nn.functional.mse_loss(self.model(x), x[:, :2])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def plot_metrics(self) -> None:
        for name, values in self.metrics.items():
            fig, ax = plt.subplots(figsize=(4, 3))  # expect: TD701
            ax.plot(values)
            ax.set_title(name)
            fig.savefig(self.out_dir / f"{name.replace(' ', '_')}.png")

    def fit(self, epochs: int = 20) -> None:
        for _ in range(epochs):
            self.metrics["loss"].append(self.train_epoch())
            self.metrics["weight norm"].append(self.model.weight.norm().item())
        self.plot_metrics()
        for callback in self.callbacks:
            callback.on_train_end(self.model)


def main() -> None:
    torch.manual_seed(0)
    trainer = Trainer()
    trainer.fit()
    print(f"final loss {trainer.metrics['loss'][-1]:.3f}; figures open: {len(plt.get_fignums())}")


if __name__ == "__main__":
    main()
