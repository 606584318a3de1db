"""A loader helper that can build a DistributedSampler, called only in its other mode.

`make_loader(..., sequential=True)` builds a SequentialSampler by default and a
DistributedSampler only when a caller passes `sequential=False`. No call in the program
does: the epochs below iterate a plain sequential loader, and there is no distributed
sampler whose epoch would need setting.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler, TensorDataset


def make_loader(dataset: TensorDataset, batch_size: int = 16, sequential: bool = True) -> DataLoader:
    if sequential:
        sampler = SequentialSampler(dataset)
    else:
        sampler = DistributedSampler(dataset)
    return DataLoader(dataset, sampler=sampler, batch_size=batch_size)


def main() -> None:
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = make_loader(dataset, batch_size=8)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(epoch, round(loss.item(), 4))


if __name__ == "__main__":
    main()
