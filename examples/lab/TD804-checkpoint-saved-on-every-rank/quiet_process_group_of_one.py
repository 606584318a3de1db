"""A weight-conversion script that starts a process group of one process.

Model-parallel layers need an initialised process group even on one device, so the
script calls `init_process_group` with `world_size=1` and `rank=0` from its own settings
before building the model. There is exactly one process and one writer of the converted
checkpoint.
"""

import argparse
import os
import tempfile

import torch
from torch import nn

args = argparse.Namespace(hidden_size=8, world_size=1, rank=0)


def main() -> None:
    store = os.path.join(tempfile.mkdtemp(), "store")
    torch.distributed.init_process_group(
        backend="gloo", init_method=f"file://{store}", world_size=args.world_size, rank=args.rank
    )
    model = nn.Linear(args.hidden_size, args.hidden_size)
    torch.save({"module": model.state_dict()}, os.path.join(tempfile.mkdtemp(), "output.pt"))
    torch.distributed.destroy_process_group()
    print("converted")


if __name__ == "__main__":
    main()
