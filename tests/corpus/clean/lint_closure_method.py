"""L-BFGS with its closure defined inside a fitting method."""

import torch
from torch import nn


class CurveFitter:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        self.optimizer = torch.optim.LBFGS(self.model.parameters(), lr=0.5, max_iter=20)
        self.criterion = nn.MSELoss()

    def fit(self, x: torch.Tensor, y: torch.Tensor, rounds: int) -> float:
        def closure() -> torch.Tensor:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            return loss

        loss = torch.tensor(0.0)
        for _ in range(rounds):
            loss = self.optimizer.step(closure)
        return float(loss)


def main() -> None:
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 64).unsqueeze(1)
    print(f"final loss {CurveFitter().fit(x, torch.sin(x), rounds=5):.5f}")


if __name__ == "__main__":
    main()
