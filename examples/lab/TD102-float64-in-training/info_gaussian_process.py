"""A Gaussian process whose kernel hyperparameters are fitted through a Cholesky solve.

The marginal likelihood factorises the kernel matrix; with 60 close inputs the matrix is
ill-conditioned, and in float32 `torch.linalg.cholesky` fails or returns a factor that
loses most of its digits. float64 here is a numerics need: information, not a warning.
"""

import math

import torch
from torch import nn


class ExactGP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log_length = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))  # expect: TD102
        self.log_noise = nn.Parameter(torch.tensor(-2.0, dtype=torch.float64))  # expect: TD102

    def kernel(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        distance = (a[:, None] - b[None, :]) / self.log_length.exp()
        return torch.exp(-0.5 * distance.pow(2))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        noise = self.log_noise.exp() * torch.eye(len(x), dtype=x.dtype)
        factor = torch.linalg.cholesky(self.kernel(x, x) + noise)
        alpha = torch.cholesky_solve(y[:, None], factor)
        fit = 0.5 * (y[:, None] * alpha).sum()
        complexity = factor.diagonal().log().sum()
        return fit + complexity + 0.5 * len(x) * math.log(2 * math.pi)


def main() -> None:
    torch.manual_seed(0)
    x = torch.linspace(0.0, 1.0, 60, dtype=torch.float64)  # expect: TD102
    y = torch.sin(6.0 * x) + 0.05 * torch.randn(60, dtype=torch.float64)  # expect: TD102
    model = ExactGP()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(30):
        optimizer.zero_grad()
        loss = model(x, y)
        loss.backward()
        optimizer.step()
    print(f"length {model.log_length.exp().item():.3f}  noise {model.log_noise.exp().item():.4f}")


if __name__ == "__main__":
    main()
