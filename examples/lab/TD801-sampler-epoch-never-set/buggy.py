"""DDP training whose DistributedSampler is never told the epoch.

`DistributedSampler` shuffles with a generator seeded by `seed + epoch`. Nobody calls
`sampler.set_epoch(epoch)` here, so the epoch stays 0 and every epoch replays exactly the
same order on every rank: the printed first indices repeat. Launch with
`torchrun --nproc-per-node 2 buggy.py`, or run `python buggy.py` for a one-process group.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def init_distributed() -> None:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python buggy.py`: a group of one process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def main() -> None:
    init_distributed()
    torch.manual_seed(0)
    indices = torch.arange(256)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    dataset = TensorDataset(indices, x, y)
    sampler = DistributedSampler(dataset, shuffle=True)  # expect: TD801
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        for step, (idx, xb, yb) in enumerate(loader):  # expect[run]: TD801
            if step == 0:
                print(f"rank {dist.get_rank()} epoch {epoch}: first indices {idx[:5].tolist()}")
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
