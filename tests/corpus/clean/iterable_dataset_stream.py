"""A streaming IterableDataset, sharded across workers, with a shuffle buffer; bf16
autocast on the CPU.

An IterableDataset cannot be shuffled by the DataLoader (`shuffle=True` raises), so it
shuffles itself through a buffer and shards the stream by `get_worker_info()` so the two
workers never yield the same records. bfloat16 autocast needs no GradScaler (bf16 has
float32's exponent range), so the optimizer is stepped directly.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class RecordStream(IterableDataset):
    def __init__(self, records=512, buffer_size=64, seed=49):
        super().__init__()
        self.records = records
        self.buffer_size = buffer_size
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _record(self, index):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        x = torch.randn(12, generator=generator)
        return x, (x[:6].sum() > x[6:].sum()).long()

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rng = torch.Generator().manual_seed(self.seed + 7919 * self.epoch + worker)
        buffer = []
        for index in range(worker, self.records, workers):
            buffer.append(self._record(index))
            if len(buffer) == self.buffer_size:
                yield buffer.pop(int(torch.randint(len(buffer), (1,), generator=rng)))
        while buffer:
            yield buffer.pop(int(torch.randint(len(buffer), (1,), generator=rng)))


def main():
    torch.manual_seed(0)
    stream = RecordStream()
    loader = DataLoader(stream, batch_size=32, num_workers=2)
    model = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        stream.set_epoch(epoch)
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                logits = model(x)
            loss = criterion(logits.float(), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
