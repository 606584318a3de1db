"""A training script whose `--random-start` flag is `type=bool, default=True`, and which
never reads it.

`--random-start False` would leave it on, but nothing in the script reads
`args.random_start` (the attack keeps its own default), and the parsed options are only
read attribute by attribute: the flag is parsed and dropped, so it changes nothing.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--random-start", default=True, type=bool)  # expect: TD913
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    for epoch in range(args.epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
