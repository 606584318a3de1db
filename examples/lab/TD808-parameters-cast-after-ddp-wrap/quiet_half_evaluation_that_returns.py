"""A DDP script whose evaluation-only mode casts the wrapped model to half and returns.

With `--evaluate` the script validates in half precision and stops: no training follows
the cast, so DDP's buckets never meet the new parameters. Training runs validate in full
precision only.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def validate(model: nn.Module, half: bool) -> float:
    if half:
        model.half()
    inputs = torch.randn(16, 8)
    with torch.no_grad():
        outputs = model(inputs.half() if half else inputs)
    return outputs.float().abs().mean().item()


def train_one_epoch(model: nn.Module, optimizer: torch.optim.Optimizer) -> float:
    for _ in range(5):
        inputs, targets = torch.randn(16, 8), torch.randn(16, 2)
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 2))
    if args.evaluate:
        print(validate(model, half=torch.cuda.is_available()))
        return
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        loss = train_one_epoch(model, optimizer)
        print(epoch, round(loss, 4), round(validate(model, half=False), 4))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    main()
    dist.destroy_process_group()
