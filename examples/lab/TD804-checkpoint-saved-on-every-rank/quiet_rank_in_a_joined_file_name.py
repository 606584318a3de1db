"""A sharded optimizer checkpoint: every rank saves its own part, under its own name.

The file name is built first, with the rank in it (`optimizer.00000-of-00001.pth`), and
then joined to the checkpoint folder: each rank writes a different file, so there is no
second writer and no half-written file to read. Only the full model, the same bytes on
every rank, is saved from rank 0. Runs as a one-process gloo group on the CPU.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group(
            "gloo", init_method=f"file://{folder}/rendezvous", rank=0, world_size=1
        )
        torch.manual_seed(0)
        model = nn.Linear(16, 16)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(5):
            x = torch.randn(8, 16)
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), x).backward()
            optimizer.step()
        checkpoint = os.path.join(folder, "0000005")
        os.makedirs(checkpoint, exist_ok=True)
        if dist.get_rank() == 0:
            torch.save(model.state_dict(), os.path.join(checkpoint, "consolidated.pth"))
        shard_name = f"optimizer.{dist.get_rank():05d}-of-{dist.get_world_size():05d}.pth"
        torch.save(optimizer.state_dict(), os.path.join(checkpoint, shard_name))
        dist.barrier()
        print(sorted(os.listdir(checkpoint)))
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
