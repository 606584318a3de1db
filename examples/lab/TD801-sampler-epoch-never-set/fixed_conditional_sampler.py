"""A loader factory that picks its sampler with a conditional expression: a
DistributedSampler when the job is distributed, none otherwise.

The epoch loop tells the sampler the epoch, when there is one: every epoch draws a new
order. Run `python fixed_conditional_sampler.py` for a one-process group.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_loader(dataset: TensorDataset, distributed: bool) -> DataLoader:
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0) if distributed else None
    return DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=sampler is None)


def main() -> None:
    torch.manual_seed(0)
    features = torch.randn(256, 8)
    dataset = TensorDataset(torch.arange(256), features, (features[:, 0] > 0).long())
    loader = make_loader(dataset, distributed=True)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        if loader.sampler is not None and hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        for step, (idx, xb, yb) in enumerate(loader):
            if step == 0:
                print(f"epoch {epoch}: first indices {idx[:5].tolist()}")
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()


if __name__ == "__main__":
    main()
