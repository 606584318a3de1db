"""A trainer that runs distributed when several GPUs are given and as one process
otherwise: `if distributed:` builds the loader with a DistributedSampler and, later,
wraps the model in DistributedDataParallel; each `else` builds the single-process loader
and a plain model.

The loader without a sampler only ever feeds the single process.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> float:
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")
    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if distributed:
        train_loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))
    else:
        train_loader = DataLoader(dataset, batch_size=8, shuffle=True)
    model: nn.Module = nn.Linear(4, 1)
    if distributed:
        model = DistributedDataParallel(model)
    else:
        model = model.to("cpu")
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
