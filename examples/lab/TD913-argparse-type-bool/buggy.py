"""A fine-tuning script whose `--pretrained` flag cannot be switched off.

`type=bool` hands the text after `--pretrained` to `bool()`: "False" is a non-empty string,
so `--pretrained False` still loads the pretrained weights. The script below parses that
very command line and starts from the "pretrained" weights anyway.
"""

import argparse

import torch
from torch import nn


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrained", type=bool, default=True)  # expect: TD913
    parser.add_argument("--augment", type=bool, default=False)  # expect: TD913
    parser.add_argument("--epochs", type=int, default=3)
    return parser.parse_args(argv)


def main() -> None:
    args = parse(["--pretrained", "False"])
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
