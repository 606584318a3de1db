"""Two ways an optimizer ends up stepping tensors the model no longer uses.

Style 1: the optimizer is built, then the model is deep-copied "to keep the original",
and the copy is trained. Style 2: the classifier head is replaced after the optimizer
was made, so the optimizer steps the old head. Either way the trained part never moves.
"""

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))


def make_loader() -> DataLoader:
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(256, 10, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)


def make():
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)  # expect[run]: TD620
    trained = copy.deepcopy(model)
    return trained, make_loader(), nn.CrossEntropyLoss(), optimizer


def train(model: nn.Module, optimizer: torch.optim.Optimizer) -> float:
    loss = torch.zeros(())
    for _ in range(2):
        for x, y in make_loader():
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def deepcopy_style() -> float:
    model, _, _, optimizer = make()
    return train(model, optimizer)


def rebuilt_head_style() -> float:
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect[run]: TD620
    model[2] = nn.Linear(32, 3)  # a fresh head, after the optimizer was made
    return train(model, optimizer)


def main() -> None:
    print(f"deepcopy: {deepcopy_style():.3f}  rebuilt head: {rebuilt_head_style():.3f}")


if __name__ == "__main__":
    main()
