"""DDP training where only rank 0 writes the checkpoint, and the others wait for it.

The weights are identical on every rank, so one copy is enough: rank 0 saves, and a
barrier keeps the other ranks from running ahead (or reading the file) before it is
complete.
"""
# lab: nproc-per-node=2

import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def init_distributed() -> None:
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    else:  # plain `python buggy.py`: a group of one process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def main() -> None:
    init_distributed()
    torch.manual_seed(0)
    checkpoint_dir = Path(tempfile.gettempdir()) / "td804-checkpoints"  # shared by all ranks
    checkpoint_dir.mkdir(exist_ok=True)
    x = torch.randn(512, 8)
    y = (x[:, 0] * x[:, 1] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        checkpoint = {
            "model": model.module.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
        }
        if dist.get_rank() == 0:
            torch.save(checkpoint, checkpoint_dir / "last.pt")
        dist.barrier()
        print(f"rank {dist.get_rank()} epoch {epoch}: loss {loss.item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
