"""The same script with flags argparse reads as booleans: `--no-pretrained` switches it off."""

import argparse

import torch
from torch import nn


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrained", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--augment", action="store_true")
    parser.add_argument("--epochs", type=int, default=3)
    return parser.parse_args(argv)


def main() -> None:
    args = parse(["--no-pretrained"])
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    if args.pretrained:
        with torch.no_grad():
            model.weight.fill_(0.5)  # stands in for loading pretrained weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, labels = torch.randn(64, 4), torch.randint(0, 2, (64,))
    for _ in range(args.epochs):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    print(f"asked for no pretrained weights, got pretrained={args.pretrained}")


if __name__ == "__main__":
    main()
