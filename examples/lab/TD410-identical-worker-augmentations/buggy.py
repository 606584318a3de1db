"""A signal classifier whose dataset adds random jitter with its own numpy generator.

The dataset creates `np.random.default_rng(0)` once, in `__init__`, for reproducibility.
Every DataLoader worker receives a copy of that generator in the same state, so worker 0
and worker 1 add exactly the same jitter sequence: with 2 workers each "random" variation
appears twice per epoch (and, with workers that restart every epoch, again in every epoch).
PyTorch reseeds numpy's global `np.random` in each worker, but not generators
that the dataset carries itself.

Two more shapes follow, trained by a trainer class whose loader is built in a helper: a
transform object that owns a `random.Random` (copied into every worker alike), and a
`worker_init_fn` that "seeds everything" to one constant, so every worker draws the same
global numpy noise.
"""

import random

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


class RandomShift:
    """A transform object that owns its generator (as augmentation libraries' do)."""

    def __init__(self, seed: int = 0) -> None:
        self.random = random.Random(seed)

    def __call__(self, wave: torch.Tensor) -> torch.Tensor:
        return torch.roll(wave, self.random.randrange(LENGTH))


class ShiftedSignals(Dataset):
    """Clean sine waves, shifted by a transform the dataset is given."""

    def __init__(self, transform: RandomShift, size: int = 128) -> None:
        self.labels = torch.randint(0, CLASSES, (size,), generator=torch.Generator().manual_seed(2))
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time = np.linspace(0, 1, LENGTH)
        wave = np.sin(2 * np.pi * (int(self.labels[index]) + 1) * 3 * time)
        return self.transform(torch.from_numpy(wave).float()), self.labels[index]


class NoisySignals(JitteredSignals):
    """The waves with noise from numpy's global generator."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time = np.linspace(0, 1, LENGTH)
        wave = np.sin(2 * np.pi * (int(self.labels[index]) + 1) * 3 * time)
        wave = wave + np.random.normal(0, 0.1, LENGTH)
        return torch.from_numpy(wave).float(), self.labels[index]


class Trainer:
    """The loader is built in a helper; each epoch starts fresh workers."""

    def __init__(self, dataset: Dataset, **loader_options: object) -> None:
        self.dataset, self.loader_options = dataset, loader_options
        self.model = nn.Sequential(nn.Linear(LENGTH, 32), nn.ReLU(), nn.Linear(32, CLASSES))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def _loader(self) -> DataLoader:
        return DataLoader(self.dataset, batch_size=32, num_workers=2, **self.loader_options)

    def _step(self, inputs: torch.Tensor, labels: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(inputs), labels)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, epochs: int, callbacks: tuple = ()) -> float:
        loss = 0.0
        for epoch in range(epochs):
            for inputs, labels in self._loader():
                loss = self._step(inputs, labels)
            for callback in callbacks:
                callback(epoch, loss)
        return loss


def log_epoch(epoch: int, loss: float) -> None:
    print(f"trainer epoch {epoch}: loss {loss:.3f}")


def seed_everything(worker_id: int) -> None:
    """Meant to make the workers reproducible: it makes them all the same."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(LENGTH, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    loader = DataLoader(  # expect[lint]: TD410
        JitteredSignals(), batch_size=32, shuffle=True, num_workers=2, persistent_workers=True
    )
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
    Trainer(ShiftedSignals(RandomShift())).fit(2, callbacks=(log_epoch,))
    Trainer(NoisySignals(), worker_init_fn=seed_everything).fit(2, callbacks=(log_epoch,))


if __name__ == "__main__":
    main()
