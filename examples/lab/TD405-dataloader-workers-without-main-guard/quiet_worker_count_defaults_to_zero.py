"""A script that builds its loaders at module level through a helper that can start workers.

`prepare_dataloader` takes `num_workers` (default 0) and hands it to the `DataLoader`.
The script has no `__main__` guard, but none of its calls asks for workers: every loader
runs in the main process, and no worker re-imports the script.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def prepare_dataloader(data, batch_size: int, shuffle: bool = False, num_workers: int = 0):
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)


torch.manual_seed(0)
dataset = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    train_loader = prepare_dataloader(dataset, batch_size=8, shuffle=True)
    valid_loader = prepare_dataloader(dataset, batch_size=16)
    for x, y in train_loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        total = sum(nn.functional.mse_loss(model(x), y, reduction="sum") for x, y in valid_loader)
    print(f"epoch {epoch}: validation loss {total.item() / len(dataset):.4f}")
