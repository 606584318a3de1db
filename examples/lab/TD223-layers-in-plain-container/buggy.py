"""A residual MLP whose hidden layers live in a plain Python list.

PyTorch never registers modules kept in a list or dict attribute: the hidden layers are
missing from `parameters()` (the optimizer never updates them), from `state_dict()` and
from `.to(device)`. The second model builds its heads in a loop and keeps them in a dict.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ResidualMLP(nn.Module):
    def __init__(self, width: int = 32, depth: int = 3) -> None:
        super().__init__()
        self.stem = nn.Linear(8, width)
        self.hidden = [nn.Linear(width, width) for _ in range(depth)]  # expect: TD223
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        for layer in self.hidden:
            x = x + torch.relu(layer(x))
        return self.out(x)


class MultiHead(nn.Module):
    def __init__(self, tasks: tuple[str, ...] = ("price", "volume")) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.heads = {}  # expect: TD223
        for task in tasks:
            self.heads[task] = nn.Linear(32, 1)
        self.blocks = []  # expect: TD223
        for _ in range(2):
            self.blocks.append(nn.Linear(32, 32))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.trunk(x)
        for block in self.blocks:
            features = torch.relu(block(features))
        return {task: head(features) for task, head in self.heads.items()}


class Ensemble(nn.Module):
    """Members averaged through a comprehension that calls each one."""

    def __init__(self, size: int = 3) -> None:
        super().__init__()
        self.members = [nn.Linear(8, 1) for _ in range(size)]  # expect: TD223
        self.calibrate = nn.Linear(1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.calibrate(torch.stack([member(x) for member in self.members]).mean(0))


def train(model: nn.Module) -> int:
    data = TensorDataset(torch.randn(128, 8), torch.randn(128, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in DataLoader(data, batch_size=32, shuffle=True):
        out = model(x)
        prediction = out if isinstance(out, torch.Tensor) else sum(out.values())
        loss = nn.functional.mse_loss(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    torch.manual_seed(0)
    print(f"trained parameters: {train(ResidualMLP())}, {train(MultiHead())}, {train(Ensemble())}")


if __name__ == "__main__":
    main()
