"""A trainer that wraps its model in DistributedDataParallel under `if parallel:` with no
`else`, and builds its loaders under the same test: a DistributedSampler when parallel,
a plain shuffled loader in the `else`.

The plain loader only ever feeds the single process, where the model is never wrapped.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> float:
    parallel = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if parallel:
        dist.init_process_group("gloo")
    model: nn.Module = nn.Linear(4, 1)
    if parallel:
        model = DistributedDataParallel(model)
    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if parallel:
        train_loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))
    else:
        train_loader = DataLoader(dataset, batch_size=8, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.zeros(())
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(f"loss {main():.3f}")
