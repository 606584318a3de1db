"""Data-parallel training whose loaders give each rank its own share of the data.

A `DistributedSampler` splits the dataset between the ranks (and `set_epoch` reshuffles
it every epoch), in the plain loop and in the helper style. Runs as one process (world
size 1) on the gloo backend.
"""
# lab: nproc-per-node=2

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset() -> TensorDataset:
    return TensorDataset(torch.randn(256, 12), torch.randint(0, 3, (256,)))


def train_plain(model: nn.Module) -> float:
    dataset = make_dataset()
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.zeros(())
    sampler.set_epoch(0)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def make_train_loader() -> DataLoader:
    dataset = make_dataset()
    sampler = DistributedSampler(dataset)
    sampler.set_epoch(0)
    train_loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    return train_loader


def train_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer) -> None:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        if "RANK" in os.environ:  # started by torchrun
            dist.init_process_group("gloo")
        else:
            dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'rdv')}",
                                    rank=0, world_size=1)
        ddp_model = DDP(nn.Linear(12, 3))
        print(f"plain: {train_plain(ddp_model):.3f}")
        train_epoch(ddp_model, make_train_loader(),
                    torch.optim.SGD(ddp_model.parameters(), lr=0.1))
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
