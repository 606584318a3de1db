"""Class-balanced resampling chosen after the DataLoader was built.

The loader is built with `sampler=train_sampler` while the name still holds `None`; the
epoch loop then builds a `WeightedRandomSampler` for the rare class and binds it to the same
name. The loader keeps the value it was given, so the sampler is never used and training
sees the imbalanced data in plain shuffled order.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(600, 8)
    labels = (torch.rand(600) < 0.05).long()  # 5 % positives
    dataset = TensorDataset(inputs + labels[:, None].float(), labels)
    train_sampler = None
    loader = DataLoader(dataset, batch_size=50, shuffle=train_sampler is None, sampler=train_sampler)
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        if epoch >= 1:  # resample from the second epoch on
            weights = torch.where(labels == 1, 10.0, 1.0).double()
            train_sampler = WeightedRandomSampler(weights, num_samples=len(labels))  # expect: TD416
        positives = 0
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            positives += int(y.sum())
        print(f"epoch {epoch}: {positives} positive examples drawn")


if __name__ == "__main__":
    main()
