"""Snapshots that are safe: one written to a file at once, and one taken when training stops.

When validation improves, the weights are saved to a file on the spot (written before the
next step changes them); when it stops improving for good, the loop keeps the current
state and leaves right away, so nothing trains past that snapshot.
"""

import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 6)
    targets = inputs.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(inputs[:192], targets[:192]), batch_size=32, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    best, patience, final_state = float("inf"), 0, None
    path = os.path.join(tempfile.mkdtemp(), "best.pt")
    for epoch in range(20):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        with torch.no_grad():
            loss = nn.functional.mse_loss(model(inputs[192:]), targets[192:]).item()
        if loss < best - 1e-4:
            best, patience = loss, 0
            torch.save(model.state_dict(), path)
        else:
            patience += 1
        if patience == 2:
            final_state = model.state_dict()
            break
    model.load_state_dict(torch.load(path, weights_only=True))
    print(f"best {best:.4f}; stopped with {len(final_state or {})} tensors kept")


if __name__ == "__main__":
    main()
