"""Two evaluations whose model is in eval mode by a route other than `model.eval()`
next to the loop.

The trainer wraps its model in DataParallel and validates after `self.model_dp.eval()`:
the wrapper holds the model as its child, so `eval()` on it sets the model's mode too.
The speed test builds its model with `.eval()` chained into the assignment, in a setup
method `__init__` calls, then scripts it from itself: it stays in eval mode.
"""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.3), nn.BatchNorm1d(16), nn.Linear(16, 1))


class Trainer:
    def __init__(self) -> None:
        self.model = make_model()
        self.model_dp = nn.DataParallel(self.model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def fit(self, steps: int = 20) -> None:
        for _ in range(steps):
            x = torch.randn(32, 8)
            loss = nn.functional.mse_loss(self.model_dp(x), x[:, :1])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self, batches: list[torch.Tensor]) -> float:
        self.model_dp.eval()
        total = 0.0
        with torch.no_grad():
            for x in batches:
                total += nn.functional.mse_loss(self.model(x), x[:, :1]).item()
        self.model_dp.train()
        return total / len(batches)


class SpeedTest:
    def __init__(self) -> None:
        self.init_model()

    def init_model(self) -> None:
        self.model = make_model().to("cpu").eval()
        self.model = torch.jit.script(self.model)

    def loop(self, frames: list[torch.Tensor]) -> int:
        with torch.no_grad():
            for x in frames:
                self.model(x)
        return len(frames)


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer()
    trainer.fit()
    print(f"validation {trainer.validate([torch.randn(16, 8) for _ in range(3)]):.3f}")
    print(f"timed {SpeedTest().loop([torch.randn(4, 8) for _ in range(5)])} frames")
