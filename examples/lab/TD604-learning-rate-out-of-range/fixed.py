"""A tabular classifier trained with AdamW at 1e-3 after a short linear warm-up.

The warm-up starts at 1% of the rate on purpose; `check` reads the schedule's base rate
(`initial_lr`) and judges that, not the tiny starting value.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 16
CLASSES = 4


def make_split(size: int, seed: int) -> TensorDataset:
    centers = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    inputs = centers[labels] + 1.5 * torch.randn(size, FEATURES, generator=generator)
    return TensorDataset(inputs, labels)


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                         nn.Linear(128, CLASSES))


def make_training():
    torch.manual_seed(0)
    model = make_model()
    loader = DataLoader(make_split(2048, seed=10), batch_size=64, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=10)
    return model, loader, nn.CrossEntropyLoss(), optimizer, scheduler


def make():
    return make_training()[:4]


def main() -> None:
    model, loader, criterion, optimizer, scheduler = make_training()
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        scheduler.step()
    test_inputs, test_labels = make_split(2048, seed=11).tensors
    model.eval()
    with torch.no_grad():
        accuracy = (model(test_inputs).argmax(dim=1) == test_labels).float().mean().item()
    print(f"test accuracy after one epoch: {accuracy:.3f}")


if __name__ == "__main__":
    main()
