"""A trainer class whose DistributedSampler is never told the epoch.

The trainer builds its DataLoader, with a shuffling `DistributedSampler` inside, once in
`__init__` and keeps it on `self`; `fit()` runs one `_run_epoch()` per epoch. Nothing on
that path calls `set_epoch`, so the sampler's epoch stays 0 and every epoch replays the
order of the first on every rank: the printed first indices repeat. Run `python
buggy_trainer_class.py` for a one-process group.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, dataset: TensorDataset) -> None:
        sampler = DistributedSampler(dataset, shuffle=True, seed=7)  # expect[lint]: TD801
        self.train_loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        self.model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.criterion = nn.CrossEntropyLoss()

    def _run_epoch(self, epoch: int) -> None:
        for step, (idx, xb, yb) in enumerate(self.train_loader):
            if step == 0:
                print(f"epoch {epoch}: first indices {idx[:5].tolist()}")
            self.optimizer.zero_grad()
            self.criterion(self.model(xb), yb).backward()
            self.optimizer.step()

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self._run_epoch(epoch)


def main() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    dataset = TensorDataset(torch.arange(256), x, (x[:, 0] > 0).long())
    Trainer(dataset).fit(epochs=3)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
