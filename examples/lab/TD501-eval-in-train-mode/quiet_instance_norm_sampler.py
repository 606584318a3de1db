"""An image-to-image generator samples fixed images under no_grad without ``eval()``.

Its only normalisation is instance norm, which tracks running statistics here. In
training mode an instance norm normalises each image by that image's own statistics,
exactly as in training; it has no dropout and no batch statistics, so nothing the
samples show is wrong. ``eval()`` would switch it to the running averages instead,
which is not what the sampler wants.
"""

import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.InstanceNorm2d(channels, affine=True, track_running_stats=True),
            nn.ReLU(),
            nn.Conv2d(channels, 3, 3, padding=1),
            nn.Tanh(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Solver:
    def __init__(self) -> None:
        self.G = Generator()
        self.optimizer = torch.optim.Adam(self.G.parameters(), lr=1e-4)

    def train(self, steps: int, fixed: torch.Tensor) -> None:
        for step in range(steps):
            real = torch.rand(4, 3, 16, 16) * 2 - 1
            loss = (self.G(real) - real).abs().mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if (step + 1) % 5 == 0:
                with torch.no_grad():
                    for image in fixed:
                        sample = self.G(image.unsqueeze(0))
                print(f"step {step + 1}: loss {loss.item():.4f}, sample mean {sample.mean():.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    Solver().train(10, torch.rand(2, 3, 16, 16))
