"""Sequence regression with L-BFGS: `optimizer.step(closure)` evaluates the closure several
times per step, and predictions run under `torch.no_grad()` between steps."""

import torch
from torch import nn


class Predictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, series):
        h = torch.zeros(series.size(0), 16, dtype=series.dtype)
        c = torch.zeros_like(h)
        outputs = []
        for t in range(series.size(1)):
            h, c = self.cell(series[:, t:t + 1], (h, c))
            outputs.append(self.out(h))
        return torch.cat(outputs, dim=1)


def main():
    torch.manual_seed(0)
    t = torch.arange(0, 41, dtype=torch.float64) / 4
    shifts = torch.rand(8, 1, dtype=torch.float64) * 6
    waves = torch.sin(t + shifts)
    inputs, targets = waves[:, :-1], waves[:, 1:]
    model = Predictor().double()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=8)
    criterion = nn.MSELoss()
    for step in range(4):
        def closure():
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            print(f"step {step}: loss {criterion(model(inputs), targets).item():.5f}")


if __name__ == "__main__":
    main()
