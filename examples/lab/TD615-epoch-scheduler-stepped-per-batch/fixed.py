"""An image classifier with a step decay stepped once per epoch.

The epoch-based schedules are stepped after the batch loop; the helper version steps a
per-batch `OneCycleLR`, which is sized in batches.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader() -> DataLoader:
    data = TensorDataset(torch.randn(320, 3, 8, 8), torch.randint(0, 10, (320,)))
    return DataLoader(data, batch_size=32, shuffle=True)


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 10))


def train_plain(epochs: int = 2) -> float:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    loader = make_loader()
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
    return scheduler.get_last_lr()[0]


def train_one_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler) -> None:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


def train_with_helper(epochs: int = 2) -> float:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = make_loader()
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1,
                                                    total_steps=epochs * len(loader))
    for _ in range(epochs):
        train_one_epoch(model, loader, optimizer, scheduler)
    return scheduler.get_last_lr()[0]


def main() -> None:
    torch.manual_seed(0)
    print(f"final lr: plain {train_plain():.2e}, helper {train_with_helper():.2e}")


if __name__ == "__main__":
    main()
