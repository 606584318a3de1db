"""A classifier trained with an EMA of its weights, evaluated at the end: the EMA never moves.

The EMA helper is called at every step, but with the EMA model in both places: each
parameter is blended with itself, so it keeps the values it had when it was copied, and
the final evaluation measures the untrained network.
"""

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(512, 10, generator=generator)
    y = (x[:, :3].sum(1) > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=generator)


@torch.no_grad()
def update_ema(ema: nn.Module, model: nn.Module, decay: float = 0.999) -> None:
    for ema_p, p in zip(ema.parameters(), model.parameters()):
        ema_p.lerp_(p, 1 - decay)


@torch.no_grad()
def accuracy(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    return hits / len(loader.dataset)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    ema_model = copy.deepcopy(model)  # expect[run]: TD623
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader()
    for _ in range(8):
        model.train()
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            update_ema(ema_model, ema_model)
    print(f"model {accuracy(model, loader):.3f} ema {accuracy(ema_model, loader):.3f}")


if __name__ == "__main__":
    main()
