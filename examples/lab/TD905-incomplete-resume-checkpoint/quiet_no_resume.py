"""A training script with no resume at all: checkpoints are snapshots for sampling.

It saves the model, its EMA and the optimizer every few steps under the step's number,
but nothing here loads a checkpoint to continue training (the only loader is the
DataLoader), so no resume can be incomplete.
"""

import copy
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS, SAVE_EVERY = 40, 10


def update_ema(ema: nn.Module, model: nn.Module, decay: float = 0.99) -> None:
    with torch.no_grad():
        for target, source in zip(ema.parameters(), model.parameters()):
            target.mul_(decay).add_(source, alpha=1 - decay)


def main() -> None:
    torch.manual_seed(0)
    folder = tempfile.mkdtemp(prefix="td905-snapshots-")
    data = torch.randn(320, 8)
    loader = DataLoader(TensorDataset(data, data.sum(1, keepdim=True)), batch_size=32)
    model = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 1))
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    while step < STEPS:
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            update_ema(ema, model)
            step += 1
            if step % SAVE_EVERY == 0:
                snapshot = {"model": model.state_dict(), "ema": ema.state_dict(),
                            "opt": opt.state_dict()}
                torch.save(snapshot, os.path.join(folder, f"{step:07d}.pt"))
    print(f"{step} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
