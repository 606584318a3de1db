"""A loader factory that can build a shuffling DistributedSampler, and no call asks it to.

``make_loader`` builds a ``DistributedSampler`` under ``if distributed:``, shuffling when
told to. The single-process fit asks for shuffling but not for a distributed sampler; the
distributed fit keeps a fixed order on purpose (``shuffle=False``); prediction takes the
defaults. No loader of the program shuffles through a DistributedSampler, so there is no
epoch for ``set_epoch`` to seed.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_loader(dataset, batch_size, shuffle=False, distributed=False):
    if distributed:
        sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=shuffle)
    else:
        sampler = None
    return DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, shuffle=shuffle and sampler is None
    )


def fit(model, optimizer, dataset, epochs=2):
    loader = make_loader(dataset, 16, shuffle=True, distributed=False)
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


def fit_distributed(model, optimizer, dataset, epochs=2):
    loader = make_loader(dataset, 16, shuffle=False, distributed=True)
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def predict(model, dataset):
    with torch.no_grad():
        return torch.cat([model(x) for x, _ in make_loader(dataset, 32)])


def main() -> None:
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    fit(model, optimizer, dataset)
    fit_distributed(model, optimizer, dataset, epochs=1)
    print("predictions:", predict(model, dataset).shape)


if __name__ == "__main__":
    main()
