"""A classifier whose parameters are stored once, as a list, and used twice.

`list(model.parameters())` can be read any number of times: the optimizer and the
clipping both see every parameter, in the plain loop and in the trainer class.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    data = TensorDataset(torch.randn(256, 20), torch.randint(0, 4, (256,)))
    return DataLoader(data, batch_size=32, shuffle=True)


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))


def train_plain(epochs: int = 2) -> float:
    model = make_model()
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    loss = torch.zeros(())
    for _ in range(epochs):
        for x, y in make_loader():
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, max_norm=0.5)
            optimizer.step()
    return loss.item()


class Trainer:
    def __init__(self) -> None:
        self.model = make_model()
        self.params = list(self.model.parameters())
        self.optimizer = torch.optim.SGD(self.params, lr=0.1, momentum=0.9)

    def clip(self) -> None:
        nn.utils.clip_grad_norm_(self.params, max_norm=0.5)

    def fit(self, epochs: int = 2) -> float:
        loss = torch.zeros(())
        for _ in range(epochs):
            for x, y in make_loader():
                loss = nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.clip()
                self.optimizer.step()
        return loss.item()


def main() -> None:
    torch.manual_seed(0)
    print(f"plain: {train_plain():.3f}  trainer: {Trainer().fit():.3f}")


if __name__ == "__main__":
    main()
