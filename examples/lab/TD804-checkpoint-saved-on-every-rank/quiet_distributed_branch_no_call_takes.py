"""A linear probe whose loader helper has a distributed mode the program never uses.

`feature_loader(..., distributed=False)` would build a DistributedSampler (asking the
process group for its rank) only when a caller passes `distributed=True`. The one call
keeps the default, nothing else sets up processes, so the program runs as one process and
its final save writes the file once.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def feature_loader(dataset: TensorDataset, batch_size: int = 32, distributed: bool = False) -> DataLoader:
    sampler = (
        torch.utils.data.DistributedSampler(
            dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank()
        )
        if distributed
        else None
    )
    return DataLoader(dataset, sampler=sampler, shuffle=not distributed, batch_size=batch_size)


def main() -> None:
    torch.manual_seed(0)
    features = TensorDataset(torch.randn(128, 16), torch.randint(0, 4, (128,)))
    loader = feature_loader(features, batch_size=16)
    probe = nn.Linear(16, 4)
    optimizer = torch.optim.SGD(probe.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(probe(x), y).backward()
        optimizer.step()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "linear_probe.pth")
        torch.save(probe.state_dict(), path)
        print(sorted(torch.load(path, weights_only=True)))


if __name__ == "__main__":
    main()
