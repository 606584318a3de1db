"""The optimizer is built from the model that is trained, after it is complete."""

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
    original = make_model()
    trained = copy.deepcopy(original)
    optimizer = torch.optim.Adam(trained.parameters(), lr=1e-2)
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
    model[2] = nn.Linear(32, 3)  # replace the head first
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return train(model, optimizer)


def main() -> None:
    print(f"deepcopy: {deepcopy_style():.3f}  rebuilt head: {rebuilt_head_style():.3f}")


if __name__ == "__main__":
    main()
