"""ReduceLROnPlateau stepped once per epoch with the validation loss; StepLR per epoch too."""

import torch
from torch import nn


def run_epoch(
    model: nn.Module, loader, criterion: nn.Module, optimizer: torch.optim.Optimizer | None
) -> float:
    training = optimizer is not None
    model.train(training)
    total = 0.0
    with torch.set_grad_enabled(training):
        for x, y in loader:
            loss = criterion(model(x), y)
            if optimizer is not None:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            total += loss.item()
    return total / len(loader)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(320, 6)
    data = torch.utils.data.TensorDataset(x, x @ torch.randn(6, 1))
    train = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    valid = torch.utils.data.DataLoader(data, batch_size=64)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)
    for epoch in range(4):
        train_loss = run_epoch(model, train, criterion, optimizer)
        valid_loss = run_epoch(model, valid, criterion, None)
        plateau.step(valid_loss)
        print(f"epoch {epoch}: train {train_loss:.3f} valid {valid_loss:.3f}")


if __name__ == "__main__":
    main()
