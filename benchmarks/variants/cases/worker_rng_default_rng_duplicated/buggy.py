"""Patch-crop augmentation for a 1-D sensor dataset, loaded with two worker
processes. The dataset owns its random generator so runs are reproducible."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class CroppedSignals(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 3, (n,), generator=g)
        t = torch.linspace(0, 12.566, 96)
        self.x = torch.sin(t * (1 + self.y.float().unsqueeze(1))) + 0.5 * torch.randn(n, 96, generator=g)
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        start = int(self.rng.integers(0, 32))
        return self.x[i, start:start + 64], self.y[i], start


def build():
    dataset = CroppedSignals(1024, seed=1)
    loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    return model, loader, F.cross_entropy, optimizer


def main():
    torch.manual_seed(0)
    model, loader, loss_fn, optimizer = build()
    for epoch in range(2):
        offsets_by_batch = []
        for xb, yb, starts in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            offsets_by_batch.append(tuple(starts.tolist()))
        repeated = len(offsets_by_batch) - len(set(offsets_by_batch))
        print(f"epoch {epoch} loss={loss.item():.4f} batches={len(offsets_by_batch)} "
              f"batches_with_repeated_crop_sequence={repeated}")


if __name__ == "__main__":
    main()
