"""DDP image-classifier style loop: DistributedSampler reshuffled every epoch, rank 0 saves.

Every rank builds the same model from the same seed, wraps it in DDP and iterates its own
shard through a `DistributedSampler` whose `set_epoch(epoch)` is called at the top of each
epoch. Only rank 0 writes the checkpoint (the unwrapped module's and the optimizer's
state_dicts, into a temporary folder) and the other ranks wait at a barrier.
`python ddp_set_epoch_rank0_save.py` spawns 2 gloo processes; under torchrun the group
comes from the environment.
"""

import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_data():
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(192, 1, 8, 8, generator=generator)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    return TensorDataset(x, y)


def train(checkpoint_dir):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    dataset = make_data()
    sampler = DistributedSampler(dataset, shuffle=True, seed=1)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(256, 2))
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        if rank == 0:
            torch.save(
                {
                    "epoch": epoch,
                    "model": model.module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                },
                os.path.join(checkpoint_dir, "last.pt"),
            )
        dist.barrier()
    dist.destroy_process_group()


def spawned(rank, world_size, port, checkpoint_dir):
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    train(checkpoint_dir)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        if "RANK" in os.environ:
            train(folder)
        else:
            mp.spawn(spawned, args=(2, free_port(), folder), nprocs=2)
