"""An evaluation script that builds a loader per dataset at module level, unguarded.

Every loader starts worker processes while the script is being imported, and the file
has no `if __name__ == "__main__":` guard: under spawn or forkserver (Windows, macOS,
Linux from Python 3.14) the first worker re-imports the script and the run fails. One
missing guard, one finding: it names the other loaders that fail with it.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
test_sets = {name: TensorDataset(torch.randn(96, 6) * scale) for name, scale in [("near", 1.0), ("far", 4.0)]}

in_loader = DataLoader(TensorDataset(torch.randn(96, 6)), batch_size=32, num_workers=2)  # expect: TD405


def max_softmax(loader: DataLoader) -> float:
    with torch.no_grad():
        scores = [model(x).softmax(dim=1).max(dim=1).values for (x,) in loader]
    return torch.cat(scores).mean().item()


print(f"in-distribution: {max_softmax(in_loader):.3f}")
for name, data in test_sets.items():
    loader = DataLoader(data, batch_size=32, num_workers=2)
    print(f"{name}: {max_softmax(loader):.3f}")
