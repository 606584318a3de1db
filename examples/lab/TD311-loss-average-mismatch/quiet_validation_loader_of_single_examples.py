"""A vocoder-style validation that averages per-example losses over the dataset.

`make_loader` builds the training loader with batches of 16 and the validation loader
with `batch_size=1`, and `validate` receives the latter from its only caller. Each batch
mean is then one example's loss, the number of batches is the number of examples, and
dividing the sum by `len(loader.dataset)` gives the right average.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(dataset: TensorDataset, train: bool) -> DataLoader:
    if train:
        return DataLoader(dataset, batch_size=16, shuffle=True, drop_last=True)
    else:
        return DataLoader(dataset, batch_size=1, shuffle=False)


def validate(model: nn.Module, valloader: DataLoader) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in valloader:
            total += F.l1_loss(model(x), y).item()
    model.train()
    return total / len(valloader.dataset)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    trainloader = make_loader(data, True)
    valloader = make_loader(data, False)
    for epoch in range(3):
        for inputs, targets in trainloader:
            optimizer.zero_grad()
            F.mse_loss(model(inputs), targets).backward()
            optimizer.step()
        print(epoch, round(validate(model, valloader), 4))


if __name__ == "__main__":
    main()
