"""A fine-tuning script that declares the launcher's `--local_rank` flag and never reads it.

It scales over the machine's GPUs with `DataParallel`, in one process, so no rank piles its
copy of the checkpoint onto cuda:0. Loading without `map_location` can still fail on a
machine without the GPU the file was saved from, which is information, not a warning.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load_model_path", default=None)
    parser.add_argument(
        "--local_rank", type=int, default=-1, help="For distributed training: local_rank"
    )
    args = parser.parse_args()
    model = nn.Linear(16, 1).cuda()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    if args.load_model_path is not None:
        model.load_state_dict(torch.load(args.load_model_path))  # expect: TD901
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(100):
        x = torch.randn(32, 16, device="cuda")
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
