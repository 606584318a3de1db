"""A pre-training script that runs with or without torch.distributed, and saves its final
weights each way.

When distributed, only rank 0 saves; the `else` of `if args.distributed:` saves plainly,
but that branch runs only in a single process: no two processes ever write the file.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main(args: argparse.Namespace) -> None:
    args.distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if args.distributed:
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = nn.Linear(16, 16)
    if args.distributed:
        model = DistributedDataParallel(model.cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(args.steps):
        x = torch.randn(8, 16, device=next(model.parameters()).device)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), x).backward()
        optimizer.step()
    if args.distributed:
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), os.path.join(args.out, "final_model.pth"))
        dist.destroy_process_group()
    else:
        torch.save(model.state_dict(), os.path.join(args.out, "final_model.pth"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=".")
    main(parser.parse_args())
