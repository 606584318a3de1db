"""One `run_epoch()` for training and evaluation, with the schedule stepped inside it.

`run_epoch()` steps the cosine schedule on every call, and the epoch loop calls it for the
training split and again for validation: the schedule planned over 12 epochs ends after
six, and the learning rate climbs back up for the rest of the run.
"""

import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR

EPOCHS = 12


def run_epoch(model, optimizer, scheduler, data, partition="train"):
    inputs, targets = data
    training = partition == "train"
    model.train(training)
    with torch.set_grad_enabled(training):
        loss = nn.functional.mse_loss(model(inputs), targets)
    if training:
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()  # expect: TD626
    return loss.item()


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 5)
    splits = {
        "train": (inputs[:192], inputs[:192].sum(1, keepdim=True)),
        "valid": (inputs[192:], inputs[192:].sum(1, keepdim=True)),
    }
    model = nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = CosineAnnealingLR(optimizer, T_max=EPOCHS)
    for epoch in range(EPOCHS):
        run_epoch(model, optimizer, scheduler, splits["train"])
        valid = run_epoch(model, optimizer, scheduler, splits["valid"], partition="valid")
        print(f"epoch {epoch}: valid {valid:.4f}, lr {optimizer.param_groups[0]['lr']:.4f}")


if __name__ == "__main__":
    main()
