"""A script whose only loads read its feature arrays; its checkpoints are per-epoch records.

The features are precomputed into `.npy` files and read back memory-mapped through a
helper of the file; each epoch saves the model and the optimizer. Nothing loads a
checkpoint to continue training, so no resume can lack the scheduler.
"""

import os
import tempfile

import numpy as np
import torch
from torch import nn


def _load_memory_mapped(path: str) -> np.ndarray:
    return np.load(path, mmap_mode="r")


def main() -> None:
    torch.manual_seed(0)
    folder = tempfile.mkdtemp(prefix="td905-arrays-")
    rng = np.random.default_rng(0)
    np.save(os.path.join(folder, "x.npy"), rng.standard_normal((256, 6)).astype(np.float32))
    np.save(os.path.join(folder, "y.npy"), rng.integers(0, 3, 256))
    features = torch.from_numpy(np.array(_load_memory_mapped(os.path.join(folder, "x.npy"))))
    labels = torch.from_numpy(np.array(_load_memory_mapped(os.path.join(folder, "y.npy"))))
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.1)
    for epoch in range(4):
        for start in range(0, 256, 32):
            loss = nn.functional.cross_entropy(
                model(features[start : start + 32]), labels[start : start + 32]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        record = {"epoch": epoch, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(record, os.path.join(folder, f"epoch_{epoch}.ckpt"))
    print(f"last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
