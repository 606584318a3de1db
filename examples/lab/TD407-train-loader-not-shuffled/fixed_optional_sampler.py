"""The same factory shuffling on a single process too.

The loader shuffles whenever it has no sampler and is a training loader; the evaluation
loader keeps its order.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset(size: int) -> TensorDataset:
    labels = torch.arange(size) * 4 // size  # stored class by class
    inputs = torch.randn(size, 8) + labels[:, None].float()
    return TensorDataset(inputs, labels)


def make_loader(dataset: TensorDataset, train: bool, distributed: bool) -> DataLoader:
    sampler = DistributedSampler(dataset, shuffle=train) if distributed else None
    sampler = sampler if train else None
    return DataLoader(dataset, batch_size=32, shuffle=train and sampler is None, sampler=sampler)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader(make_dataset(512), train=True, distributed=False)
    for _ in range(3):
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
    print(f"last batch loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
