"""A benchmark that trains each method in float64 unless the user asks for float32 with
`--use-float`: the two precisions sit on the two arms of one `if`.

The float64 cast is a choice the program offers, and its default: information, not a
warning. float32 would halve the memory and run much faster on most GPUs.
"""

import argparse

import torch
from torch import nn


class Method:
    def __init__(self, args: argparse.Namespace) -> None:
        self.model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        self.dtype = torch.float32 if args.use_float else torch.float64
        if args.use_float:
            self.model.float()
        else:
            self.model.double()  # expect: TD102

    def fit(self, x: torch.Tensor, y: torch.Tensor, steps: int = 30) -> float:
        optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        loss = torch.zeros(())
        for _ in range(steps):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(x.to(self.dtype)), y.to(self.dtype))
            loss.backward()
            optimizer.step()
        return loss.item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--use-float", action="store_true")
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    print(f"loss {Method(parser.parse_args([])).fit(x, x.sum(1, keepdim=True)):.4f}")
