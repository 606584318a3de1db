"""A deep (10-layer) network with BatchNorm and ReLU: gradients reach the first layers.

ReLU passes the backward signal unchanged where a unit is active, and BatchNorm keeps
every layer's activations at unit scale, so depth no longer shrinks the gradients.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CLASSES, DEPTH = 16, 4, 10


def deep_network(activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(FEATURES, 64), nn.BatchNorm1d(64), activation()]
    for _ in range(DEPTH - 2):
        layers += [nn.Linear(64, 64), nn.BatchNorm1d(64), activation()]
    layers.append(nn.Linear(64, CLASSES))
    return nn.Sequential(*layers)


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(size, FEATURES, generator=generator)
    labels = (features[:, :2] > 0).long() @ torch.tensor([1, 2])
    return TensorDataset(features, labels)


def make():
    torch.manual_seed(0)
    model = deep_network(nn.ReLU)
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
