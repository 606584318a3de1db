"""A signal classifier whose dataset's numpy generator is reseeded in every worker.

The dataset still creates `np.random.default_rng(0)` in `__init__`, but a `worker_init_fn`
replaces it in each worker with a generator seeded from the seed PyTorch chose for that
worker (different per worker and per epoch), so every worker draws its own jitter.
"""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

LENGTH = 64
CLASSES = 3


class JitteredSignals(Dataset):
    """Clean sine waves of three frequencies, with random amplitude and phase jitter."""

    def __init__(self, size: int = 256) -> None:
        generator = torch.Generator().manual_seed(1)
        self.labels = torch.randint(0, CLASSES, (size,), generator=generator)
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        label = int(self.labels[index])
        phase = self.rng.uniform(0, 2 * np.pi)
        amplitude = self.rng.uniform(0.8, 1.2)
        time = np.linspace(0, 1, LENGTH)
        wave = amplitude * np.sin(2 * np.pi * (label + 1) * 3 * time + phase)
        wave = wave + self.rng.normal(0, 0.1, LENGTH)
        return torch.from_numpy(wave).float(), self.labels[index]


def seed_worker(worker_id: int) -> None:
    """Give the dataset copy in this worker its own generator."""
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(LENGTH, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    loader = DataLoader(JitteredSignals(), batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=True, worker_init_fn=seed_worker)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(2):
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
