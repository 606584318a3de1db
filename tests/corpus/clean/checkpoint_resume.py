"""Save a full resume checkpoint every epoch and resume from it.

The checkpoint holds model, optimizer, scheduler, the epoch and the RNG state; it is
loaded back with `map_location` and `weights_only=True`. The script trains two epochs,
then "restarts" from the file and trains to four.
"""

import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

TOTAL_EPOCHS = 4


def build():
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    return model, optimizer, scheduler


def make_loader():
    generator = torch.Generator().manual_seed(12)
    x = torch.randn(192, 8, generator=generator)
    y = torch.bucketize(x[:, 0].contiguous(), torch.tensor([-0.5, 0.5]))
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)


def save_checkpoint(path, model, optimizer, scheduler, epoch):
    torch.save({
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
        "rng": torch.get_rng_state(),
    }, path)


def load_checkpoint(path, model, optimizer, scheduler):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    torch.set_rng_state(checkpoint["rng"])
    return checkpoint["epoch"] + 1


def train(path, stop_after):
    model, optimizer, scheduler = build()
    loader = make_loader()
    criterion = nn.CrossEntropyLoss()
    start_epoch = load_checkpoint(path, model, optimizer, scheduler) if os.path.exists(path) else 0
    for epoch in range(start_epoch, stop_after):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        scheduler.step()
        save_checkpoint(path, model, optimizer, scheduler, epoch)
        print(f"epoch {epoch}: loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "last.pt")
        train(path, stop_after=2)
        print("-- resuming --")
        train(path, stop_after=TOTAL_EPOCHS)


if __name__ == "__main__":
    main()
