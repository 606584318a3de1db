"""A texture network whose MLP scales its own gradients with a hook on its layers.

`MLP` registers a backward hook on its own `self.net` (a Sequential) and calls it through
`__call__`. `Texture.sample` calls `self.net.forward(...)`, where its `self.net` is the
MLP, another object that nothing hooks: the MLP's forward still calls the hooked
Sequential, so the gradients are scaled either way. The direct call is information.
"""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 3))
        self.scale = scale
        self.net.register_full_backward_hook(self._scale_gradients)

    def _scale_gradients(self, module: nn.Module, grad_in: tuple, grad_out: tuple) -> tuple:
        return tuple(None if g is None else g * self.scale for g in grad_in)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.net(points)


class Texture(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = MLP(0.5)

    def sample(self, points: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net.forward(points))  # expect: TD206


def main() -> None:
    torch.manual_seed(0)
    texture = Texture()
    optimizer = torch.optim.Adam(texture.parameters(), lr=1e-2)
    points, colours = torch.rand(64, 3), torch.rand(64, 3)
    for _ in range(10):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(texture.sample(points), colours)
        loss.backward()
        optimizer.step()
    print(round(loss.item(), 4))


if __name__ == "__main__":
    main()
