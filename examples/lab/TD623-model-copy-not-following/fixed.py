"""A classifier trained with an EMA of its weights, and the best model kept aside.

The EMA follows the model with decay 0.999 (it changes a little at every step), and a
snapshot of the model is taken with `copy.deepcopy` whenever the validation accuracy
improves; it is only used at the end.
"""

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(seed: int) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
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
    ema_model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader, validation = make_loader(1), make_loader(2)
    best, best_model = -1.0, None
    for _ in range(8):
        model.train()
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            update_ema(ema_model, model)
        score = accuracy(model, validation)
        if score > best:
            best, best_model = score, copy.deepcopy(model)
    assert best_model is not None
    print(f"best {accuracy(best_model, validation):.3f} ema {accuracy(ema_model, validation):.3f}")


if __name__ == "__main__":
    main()
