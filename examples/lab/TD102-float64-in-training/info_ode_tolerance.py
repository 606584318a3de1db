"""Fitting the decay rate of an ODE through a solver run at a tolerance float32 cannot meet.

The adaptive solver keeps halving its step until the local error estimate is under
`rtol`/`atol` = 1e-9; float32 rounds at about 1.2e-7, so in float32 the error estimate is
mostly rounding noise and the solver either never accepts a step or accepts a wrong one.
float64 is the precision this program asks for: information, not a warning.
"""

import torch
from torch import nn

torch.set_default_dtype(torch.float64)  # expect: TD102


class Decay(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log_rate = nn.Parameter(torch.tensor(0.0))

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return -self.log_rate.exp() * y


def rk4_step(f: nn.Module, y: torch.Tensor, h: float) -> torch.Tensor:
    k1 = f(y)
    k2 = f(y + 0.5 * h * k1)
    k3 = f(y + 0.5 * h * k2)
    k4 = f(y + h * k3)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def integrate(
    f: nn.Module, y: torch.Tensor, t_end: float, rtol: float, atol: float
) -> torch.Tensor:
    """RK4 with step doubling: a step is accepted when one full step and two half steps
    agree to within the tolerance."""
    t, h = 0.0, 0.1
    while t < t_end - 1e-12:
        h = min(h, t_end - t)
        full = rk4_step(f, y, h)
        halves = rk4_step(f, rk4_step(f, y, h / 2), h / 2)
        error = (full - halves).abs().max().item()
        if error <= atol + rtol * halves.abs().max().item():
            y, t = halves, t + h
            h *= 1.5
        else:
            h *= 0.5
    return y


def main() -> None:
    torch.manual_seed(0)
    model = Decay()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    y0 = torch.tensor([1.0, 2.0])
    observed = y0 * torch.exp(torch.tensor(-0.7))
    for _ in range(20):
        optimizer.zero_grad()
        predicted = integrate(model, y0, 1.0, rtol=1e-9, atol=1e-9)
        loss = (predicted - observed).pow(2).sum()
        loss.backward()
        optimizer.step()
    print(f"rate {model.log_rate.exp().item():.4f} (true 0.7000)")


if __name__ == "__main__":
    main()
