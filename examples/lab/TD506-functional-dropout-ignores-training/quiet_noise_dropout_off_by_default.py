"""A diffusion sampler with an optional dropout on its sampling noise, off by default.

`p_sample` drops part of the added noise only under `if noise_dropout > 0.0:`, and the
rate defaults to 0: the functional dropout runs only when a caller asks for it, on
purpose, while sampling without gradients. Nothing calls it with a rate.
"""

import torch
from torch import nn


class Sampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.denoiser = nn.Sequential(nn.Linear(4, 16), nn.SiLU(), nn.Linear(16, 4))

    @torch.no_grad()
    def p_sample(self, x: torch.Tensor, temperature: float = 1.0,
                 noise_dropout: float = 0.0) -> torch.Tensor:
        noise = torch.randn_like(x) * temperature
        if noise_dropout > 0.0:
            noise = torch.nn.functional.dropout(noise, p=noise_dropout)
        return x - 0.1 * self.denoiser(x) + 0.01 * noise

    def sample(self, steps: int = 10) -> torch.Tensor:
        x = torch.randn(8, 4)
        for _ in range(steps):
            x = self.p_sample(x)
        return x


if __name__ == "__main__":
    torch.manual_seed(0)
    print(Sampler().eval().sample().std().item())
