"""A single-process training script whose log line was copied from a distributed
template.

The only distributed call is `torch.distributed.get_world_size()` in the batch-size log
line, behind `args.local_rank != -1`; nothing in the program starts a process group or
wraps the model for several processes, so there is one process and one writer of the
saved arguments and weights.
"""

import argparse
import logging

import torch
from torch import nn

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


def train(args: argparse.Namespace, model: nn.Module) -> None:
    logger.info(
        "total batch size = %d",
        args.batch_size * (torch.distributed.get_world_size() if args.local_rank != -1 else 1),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(args.batch_size, 4), torch.randn(args.batch_size, 1)
    for _ in range(5):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--output", default="model.pt")
    args = parser.parse_args()
    model = nn.Linear(4, 1)
    train(args, model)
    torch.save({"args": vars(args), "model": model.state_dict()}, args.output)


if __name__ == "__main__":
    main()
