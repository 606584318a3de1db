"""A step schedule built inside the epoch loop, so it starts over every epoch.

`StepLR(optimizer, step_size=2, gamma=0.5)` should halve the learning rate every two
epochs. Built anew at the top of each epoch, every new scheduler resets the rate to its
start and is stepped once before the next one replaces it: the rate stays at 0.1 for the
whole run.
"""

import torch
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 6)
    loader = DataLoader(TensorDataset(inputs, inputs.sum(1, keepdim=True)), batch_size=32, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(6):
        scheduler = StepLR(optimizer, step_size=2, gamma=0.5)  # expect: TD625
        for batch_inputs, targets in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(batch_inputs), targets).backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch}: lr {optimizer.param_groups[0]['lr']:.4f}")


if __name__ == "__main__":
    main()
