"""DistributedDataParallel with a DistributedSampler, runnable with or without torchrun.

Under torchrun the process group is set up from the environment; run as `python ddp_sampler.py`
it starts a one-process gloo group through a file store, so the same code path runs.
`sampler.set_epoch(epoch)` reshuffles every epoch, the DataLoader does not shuffle on its
own (the sampler does), only the main process writes the checkpoint (through an
`is_main_process()` helper), and it saves the unwrapped module's state_dict through a
`model_without_ddp` alias (no `module.` prefix). Gradients are accumulated over two
micro-batches; the first runs under `model.no_sync()` so DDP all-reduces once per step.
A validation loader uses its own DistributedSampler with `shuffle=False`, which needs no
`set_epoch`.
"""

import contextlib
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ACCUMULATE = 2


def setup(workdir):
    if "RANK" in os.environ:
        dist.init_process_group(backend="gloo")
    else:
        dist.init_process_group(backend="gloo", init_method=f"file://{os.path.join(workdir, 'store')}",
                                rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size()


def is_main_process():
    return not dist.is_initialized() or dist.get_rank() == 0


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as workdir:
        rank, world_size = setup(workdir)
        try:
            generator = torch.Generator().manual_seed(11)
            x = torch.randn(256, 10, generator=generator)
            y = (x.sum(dim=1, keepdim=True) > 0).float()
            dataset = TensorDataset(x, y)
            sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
            loader = DataLoader(dataset, batch_size=16, sampler=sampler)
            val_set = TensorDataset(x[:64], y[:64])
            val_loader = DataLoader(val_set, batch_size=32,
                                    sampler=DistributedSampler(val_set, num_replicas=world_size, rank=rank,
                                                               shuffle=False))

            model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)))
            model_without_ddp = model.module
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            criterion = nn.BCEWithLogitsLoss()

            for epoch in range(3):
                sampler.set_epoch(epoch)
                model.train()
                optimizer.zero_grad()
                for i, (inputs, targets) in enumerate(loader):
                    last_micro_batch = (i + 1) % ACCUMULATE == 0
                    with contextlib.nullcontext() if last_micro_batch else model.no_sync():
                        loss = criterion(model(inputs), targets) / ACCUMULATE
                        loss.backward()
                    if last_micro_batch:
                        optimizer.step()
                        optimizer.zero_grad()
                model.eval()
                with torch.no_grad():
                    correct = sum(((model(v) > 0).float() == t).sum() for v, t in val_loader)
                if rank == 0:
                    print(f"epoch {epoch}: loss {loss.item() * ACCUMULATE:.4f} val correct {int(correct)}")

            if is_main_process():
                torch.save(model_without_ddp.state_dict(), os.path.join(workdir, "model.pt"))
            dist.barrier()
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
