"""Full-batch L-BFGS: the optimizer calls a closure that clears, recomputes and backprops.

`optimizer.step(closure)` evaluates the closure several times per step; gradients are
cleared inside the closure, so no `zero_grad()` appears in the loop body itself.
"""

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(32)
    x = torch.linspace(-2, 2, 128).unsqueeze(1)
    y = torch.sin(2 * x) + 0.05 * torch.randn(128, 1, generator=generator)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=20, history_size=10,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        return loss

    for step in range(8):
        loss = optimizer.step(closure)
        print(f"step {step}: mse {loss.item():.5f}")


if __name__ == "__main__":
    main()
