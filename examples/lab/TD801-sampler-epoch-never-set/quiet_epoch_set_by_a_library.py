"""A DDP loop that draws batches from an endless iterator built by a library helper.

The helper is given the loader and its DistributedSampler together and calls
`sampler.set_epoch(epoch)` each time it starts a new pass over the loader (as trlX's
`infinite_dataloader` does), so every epoch is shuffled anew although this file never
calls `set_epoch` itself.
"""

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from mylab.data import infinite_dataloader  # the helper that sets the epoch


def train(model: torch.nn.Module, steps_per_epoch: int = 100, epochs: int = 10) -> None:
    dataset = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
    sampler = DistributedSampler(dataset, shuffle=True)
    batches = infinite_dataloader(DataLoader(dataset, batch_size=32, sampler=sampler), sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            x, y = next(batches)
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
