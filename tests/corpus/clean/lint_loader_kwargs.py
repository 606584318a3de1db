"""Loader options gathered in dicts and updated by flags, then passed as **kwargs."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args([])
    torch.manual_seed(0)
    train_kwargs = {"batch_size": args.batch_size}
    test_kwargs = {"batch_size": 2 * args.batch_size}
    loader_kwargs = {"num_workers": args.workers, "shuffle": True}
    train_kwargs.update(loader_kwargs)
    x = torch.randn(256, 4)
    train_set = TensorDataset(x, (x[:, 0] > 0).long())
    test_set = TensorDataset(x[:64], (x[:64, 0] > 0).long())
    train_loader = DataLoader(train_set, **train_kwargs)
    test_loader = DataLoader(test_set, **test_kwargs)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        model.train()
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(i).argmax(1) == t).sum().item() for i, t in test_loader)
        print(f"epoch {epoch}: accuracy {correct / len(test_set):.2f}")


if __name__ == "__main__":
    main()
