"""A deep (10-layer) sigmoid network on tabular data.

Each sigmoid scales the backward signal by at most 0.25, so the first layers get
gradients about a million times smaller than the last: they barely move, and the deep
network trains worse than a shallow one.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES, DEPTH = 16, 4, 10


def deep_network(activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(FEATURES, 64), activation()]
    for _ in range(DEPTH - 2):
        layers += [nn.Linear(64, 64), activation()]
    layers.append(nn.Linear(64, CLASSES))
    return nn.Sequential(*layers)


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    labels = (features[:, :2] > 0).long() @ torch.tensor([1, 2])
    return TensorDataset(features, labels)


def make():
    torch.manual_seed(0)
    model = deep_network(nn.Sigmoid)
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(5):
        for features, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(features), labels)
            loss.backward()
            optimizer.step()
        first = model[0].weight.grad.abs().mean().item()
        print(f"epoch {epoch}: loss {loss.item():.3f}, first-layer |grad| {first:.2e}")


if __name__ == "__main__":
    main()
