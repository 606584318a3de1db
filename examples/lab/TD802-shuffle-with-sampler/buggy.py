"""A script that shuffles on one GPU and uses a DistributedSampler on several.

With one process the sampler is `None` and `shuffle=True` is fine, so every local test
passes. Under `torchrun --nproc-per-node 2` the sampler exists, and `DataLoader` refuses
the pair at construction: "ValueError: sampler option is mutually exclusive with
shuffle", after the job has waited in the queue for its GPUs.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def init_distributed() -> int:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python buggy.py`: a group of one process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.get_world_size()


def main() -> None:
    world_size = init_distributed()
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x[:, 0] - x[:, 1] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset) if world_size > 1 else None
    loader = DataLoader(dataset, batch_size=32, shuffle=True, sampler=sampler)  # expect: TD802
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"rank {dist.get_rank()} epoch {epoch}: loss {loss.item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
