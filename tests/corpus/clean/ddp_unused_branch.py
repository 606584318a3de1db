"""DDP that really needs `find_unused_parameters=True`: an auxiliary head used on some steps.

The auxiliary head runs only on every other step, so on the other steps its parameters get
no gradient, and DDP must be told to look for them (`find_unused_parameters=True`), or its
reduction would wait for them forever. The data is sharded by a `DistributedSampler` with
`set_epoch` called every epoch. `python ddp_unused_branch.py` spawns 2 gloo processes;
under torchrun the group comes from the environment.
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 2)
        self.auxiliary = nn.Linear(32, 1)

    def forward(self, inputs, with_auxiliary):
        features = self.body(inputs)
        logits = self.head(features)
        if with_auxiliary:
            return logits, self.auxiliary(features).squeeze(1)
        return logits, None


def train():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(13)
    x = torch.randn(256, 8, generator=generator)
    y = (x[:, 0] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, seed=3)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(TwoHeads(), find_unused_parameters=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for inputs, labels in loader:
            optimizer.zero_grad()
            logits, auxiliary = model(inputs, with_auxiliary=step % 2 == 1)
            loss = nn.functional.cross_entropy(logits, labels)
            if auxiliary is not None:
                loss = loss + 0.1 * nn.functional.mse_loss(auxiliary, inputs[:, 1])
            loss.backward()
            optimizer.step()
            step += 1
    dist.destroy_process_group()


def spawned(rank, world_size, port):
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    train()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    if "RANK" in os.environ:
        train()
    else:
        mp.spawn(spawned, args=(2, free_port()), nprocs=2)
