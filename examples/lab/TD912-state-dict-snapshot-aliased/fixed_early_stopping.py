"""An early-stopping helper that keeps the best weights and hands them back at the end.

`EarlyStopping.__call__` runs once per epoch; when validation improves it keeps a deep
copy of `model.state_dict()`, which later epochs leave alone, so the weights loaded when
patience runs out are the ones that scored best.
"""

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class EarlyStopping:
    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best = float("inf")
        self.counter = 0
        self.best_state: dict[str, torch.Tensor] = {}

    def __call__(self, val_loss: float, model: nn.Module) -> None:
        if val_loss < self.best:
            self.best = val_loss
            self.best_state = copy.deepcopy(model.state_dict())
            self.counter = 0
        else:
            self.counter += 1

    @property
    def should_stop(self) -> bool:
        return self.counter >= self.patience


def train_one_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer) -> None:
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 6)
    targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1)
    loader = DataLoader(TensorDataset(inputs[:192], targets[:192]), batch_size=32, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    stopper = EarlyStopping(patience=2)
    for epoch in range(12):
        for group in optimizer.param_groups:  # late epochs overshoot
            group["lr"] = 0.05 if epoch < 4 else 0.4
        train_one_epoch(model, loader, optimizer)
        with torch.no_grad():
            val_loss = nn.functional.mse_loss(model(inputs[192:]), targets[192:]).item()
        stopper(val_loss, model)
        print(f"epoch {epoch}: validation loss {val_loss:.4f}")
        if stopper.should_stop:
            break
    model.load_state_dict(stopper.best_state)
    with torch.no_grad():
        restored = nn.functional.mse_loss(model(inputs[192:]), targets[192:]).item()
    print(f"best {stopper.best:.4f}, restored {restored:.4f}")


if __name__ == "__main__":
    main()
