"""A custom Dataset with random augmentation, loaded by worker processes.

Augmentations draw from torch's RNG (flip, noise), `random` (shift) and NumPy (contrast).
PyTorch seeds torch and `random` differently in every worker; `worker_init_fn` seeds
NumPy (and `random` again) from the worker's torch seed, and the
loader gets its own seeded `generator` so the shuffle order is reproducible. Workers
are created under the `__main__` guard and kept alive between epochs.
"""

import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class NoisyPatterns(Dataset):
    """8x8 single-channel patterns of four classes, randomly flipped and jittered."""

    def __init__(self, size=256, seed=24):
        generator = torch.Generator().manual_seed(seed)
        self.prototypes = torch.randn(4, 1, 8, 8, generator=generator)
        self.labels = torch.randint(0, 4, (size,), generator=generator)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        label = self.labels[index]
        image = self.prototypes[label].clone()
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        shift = random.randint(-1, 1)
        image = torch.roll(image, shifts=shift, dims=-2)
        contrast = float(np.random.uniform(0.8, 1.2))
        image = contrast * image + 0.3 * torch.randn_like(image)
        return image, label


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def build_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def build_loader(size=256):
    return DataLoader(NoisyPatterns(size), batch_size=32, shuffle=True, num_workers=2,
                      worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(0),
                      persistent_workers=True)


def make():
    torch.manual_seed(0)
    model = build_model()
    return model, build_loader(), nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=2e-3)


def main():
    torch.manual_seed(0)
    loader = build_loader()
    model = build_model()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
