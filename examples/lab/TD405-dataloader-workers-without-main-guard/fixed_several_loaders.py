"""The evaluation script of buggy_several_loaders.py, with its program under a guard.

The loaders are built inside `main()`, which runs only when the file is executed: a
worker that re-imports the module defines the functions and stops.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def max_softmax(model: nn.Module, loader: DataLoader) -> float:
    with torch.no_grad():
        scores = [model(x).softmax(dim=1).max(dim=1).values for (x,) in loader]
    return torch.cat(scores).mean().item()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
    test_sets = {name: TensorDataset(torch.randn(96, 6) * scale) for name, scale in [("near", 1.0), ("far", 4.0)]}
    in_loader = DataLoader(TensorDataset(torch.randn(96, 6)), batch_size=32, num_workers=2)
    print(f"in-distribution: {max_softmax(model, in_loader):.3f}")
    for name, data in test_sets.items():
        loader = DataLoader(data, batch_size=32, num_workers=2)
        print(f"{name}: {max_softmax(model, loader):.3f}")


if __name__ == "__main__":
    main()
