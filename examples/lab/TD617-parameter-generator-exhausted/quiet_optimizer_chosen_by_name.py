"""A training script that builds one optimizer, chosen by name, from one generator.

`model.parameters()` is a generator: a second optimizer built from it would get no
parameters. Here each optimizer sits under its own `if` on the optimizer's name, so
exactly one of them is built, and it gets every parameter.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    args = parser.parse_args([])
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    params_to_optimize = model.parameters()
    if args.optimizer.lower() == "adamw":
        optimizer = torch.optim.AdamW(params_to_optimize, lr=0.01)
    if args.optimizer.lower() == "sgd":
        optimizer = torch.optim.SGD(params_to_optimize, lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for step in range(3):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
