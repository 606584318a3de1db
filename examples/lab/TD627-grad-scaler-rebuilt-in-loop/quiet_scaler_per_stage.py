"""Cross-validation: every fold builds a new model, optimizer and GradScaler, and trains
them through a helper with its own batch loop; a second stage builds one scaler per epoch
and uses it across that epoch's batches. Each scaler lives across many steps and adapts
within them: nothing is thrown away after a single step."""

import torch
from torch import nn

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def train_fold(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    for inputs, targets in batches:
        optimizer.zero_grad()
        with torch.autocast(DEVICE, enabled=DEVICE == "cuda"):
            loss = nn.functional.mse_loss(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def cross_validate(folds: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> None:
    for batches in folds:
        model = nn.Linear(4, 1).to(DEVICE)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(DEVICE, enabled=DEVICE == "cuda")
        train_fold(model, optimizer, scaler, batches)


def fine_tune(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        scaler = torch.amp.GradScaler(DEVICE, enabled=DEVICE == "cuda")
        for inputs, targets in batches:
            optimizer.zero_grad()
            with torch.autocast(DEVICE, enabled=DEVICE == "cuda"):
                loss = nn.functional.mse_loss(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


def evaluate_without_scaling(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for inputs, targets in batches:
        scaler = torch.amp.GradScaler(DEVICE, enabled=False)
        optimizer.zero_grad()
        scaler.scale(nn.functional.mse_loss(model(inputs), targets)).backward()
        scaler.step(optimizer)
        scaler.update()


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [[(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)] for _ in range(3)]
    cross_validate(data)
    fine_tune(nn.Linear(4, 1), data[0])
