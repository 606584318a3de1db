"""A snapshot taken on every pass, by whichever branch fits how the model is wrapped.

Each epoch, the process that saves takes the state dict from the wrapped model's
`.module` when it is wrapped and from the model itself otherwise, and writes it at once
(as the latest checkpoint, and as the best one when the loss improved). Both branches take
the snapshot, so every pass reads its own, before any later step changes the weights.
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
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True)
    model: nn.Module = nn.Linear(6, 1)
    wrapped = isinstance(model, nn.DataParallel)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    folder = tempfile.mkdtemp()
    best = float("inf")
    for epoch in range(5):
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if wrapped:
            state = model.module.state_dict()
        else:
            state = model.state_dict()
        torch.save(state, os.path.join(folder, "latest.pt"))
        if total < best:
            best = total
            torch.save(state, os.path.join(folder, "best.pt"))
        print(f"epoch {epoch}: loss {total / len(loader):.4f}")


if __name__ == "__main__":
    main()
