"""A script whose global loader's sampler is told the epoch before each pass.

The DistributedSampler and its DataLoader are built once when the script starts;
`train_one_epoch()` iterates the global `loader`, and `main()` calls `sampler.set_epoch(epoch)`
before each call, so every epoch gets a new order, the same on all ranks. Run `python
fixed_module_loader.py` for a one-process group.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

torch.manual_seed(0)
features = torch.randn(256, 8)
dataset = TensorDataset(torch.arange(256), features, (features[:, 0] > 0).long())
sampler = DistributedSampler(dataset, num_replicas=1, rank=0, seed=3)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_one_epoch(epoch: int) -> None:
    for step, (idx, xb, yb) in enumerate(loader):
        if step == 0:
            print(f"epoch {epoch}: first indices {idx[:5].tolist()}")
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()


def main() -> None:
    for epoch in range(3):
        sampler.set_epoch(epoch)
        train_one_epoch(epoch)


if __name__ == "__main__":
    main()
