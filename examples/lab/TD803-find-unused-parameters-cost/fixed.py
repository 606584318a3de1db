"""DDP with the default `find_unused_parameters=False`: every parameter gets a gradient.

Every parameter of this model takes part in every forward pass, so DDP needs no graph
walk to know which gradients to wait for. (A model that really skips parameters in
some steps keeps the flag; one that always skips the same ones can use
`static_graph=True` instead.)
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def init_distributed() -> None:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python buggy.py`: a group of one process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def main() -> None:
    init_distributed()
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x[:, :3].sum(dim=1) > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    net = nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2),
    )
    model = DistributedDataParallel(net)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
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
