"""A training script that calls main() without an `if __name__ == "__main__":` guard.

On Linux with Python <= 3.13 (fork) this runs. Where workers start with spawn or forkserver
(Windows, macOS, Linux from Python 3.14), each worker re-imports this file, which calls
main() again and tries to start workers of its own: the run dies with "An attempt has been
made to start a new process before the current process has finished its bootstrapping
phase". (This file deliberately breaks the lab's own guard convention: that is the bug.)
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 12


def make_dataset(size: int = 256) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = inputs @ torch.linspace(-1.0, 1.0, FEATURES)
    return TensorDataset(inputs, targets.unsqueeze(1))


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True, num_workers=2)  # expect: TD405
    model = nn.Sequential(nn.Linear(FEATURES, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.MSELoss()
    for epoch in range(2):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


main()
