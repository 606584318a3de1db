"""A residual MLP and a multi-head model whose layers are registered containers.

`nn.ModuleList` and `nn.ModuleDict` register every layer they hold, so all of them are
in `parameters()`, `state_dict()` and follow `.to(device)`.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ResidualMLP(nn.Module):
    def __init__(self, width: int = 32, depth: int = 3) -> None:
        super().__init__()
        self.stem = nn.Linear(8, width)
        self.hidden = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
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
        self.heads = nn.ModuleDict()
        for task in tasks:
            self.heads[task] = nn.Linear(32, 1)
        self.blocks = nn.ModuleList()
        for _ in range(2):
            self.blocks.append(nn.Linear(32, 32))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.trunk(x)
        for block in self.blocks:
            features = torch.relu(block(features))
        return {task: head(features) for task, head in self.heads.items()}


class PickedEncoder(nn.Module):
    """A menu of encoders in a plain dict is fine when the one in use is stored in a
    registered attribute: its parameters are registered, the others never run."""

    def __init__(self, name: str = "wide") -> None:
        super().__init__()
        self.encoders = {"narrow": nn.Linear(8, 16), "wide": nn.Linear(8, 64)}
        self.encoder = self._pick(name)
        self.out = nn.Linear(self.encoder.out_features, 1)

    def _pick(self, name: str) -> nn.Linear:
        try:
            chosen = self.encoders[name]
        except KeyError:
            raise ValueError(f"unknown encoder {name!r}") from None
        return chosen

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.encoder(x)))


class MovingAverage(nn.Module):
    """A smoothing block: pooling only, so it holds no parameters or buffers."""

    def __init__(self, kernel: int) -> None:
        super().__init__()
        self.pad = kernel // 2
        self.pool = nn.AvgPool1d(kernel, stride=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = nn.functional.pad(x.unsqueeze(1), (self.pad, self.pad), mode="replicate")
        return self.pool(padded).squeeze(1)


class MultiScaleTrend(nn.Module):
    """A plain list of parameter-free blocks loses nothing: there is nothing to train,
    save or move. The layer with weights is registered."""

    def __init__(self, kernels: tuple[int, ...] = (3, 5, 7)) -> None:
        super().__init__()
        self.smoothers = [MovingAverage(k) for k in kernels]
        self.out = nn.Linear(8 * len(kernels), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        trends = []
        for smooth in self.smoothers:
            trends.append(smooth(x))
        return self.out(torch.cat(trends, dim=1))


class Ensemble(nn.Module):
    """Members averaged through a comprehension that calls each one."""

    def __init__(self, size: int = 3) -> None:
        super().__init__()
        self.members = nn.ModuleList([nn.Linear(8, 1) for _ in range(size)])
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
    models = [ResidualMLP(), MultiHead(), PickedEncoder(), MultiScaleTrend(), Ensemble()]
    sizes = [train(model) for model in models]
    print(f"trained parameters: {sizes}")


if __name__ == "__main__":
    main()
