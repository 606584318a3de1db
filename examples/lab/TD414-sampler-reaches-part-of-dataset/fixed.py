"""The same imbalanced 4-class problem, balanced with one weight per example.

Each example's weight is its class's inverse frequency (`class_weights[labels]`), so the
sampler draws from all 1,200 examples with the classes balanced.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

CLASSES = 4
FEATURES = 8


def make_split(size: int, seed: int) -> TensorDataset:
    """Gaussian clusters, one per class, with class 0 six times as frequent as the others."""
    centers = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    probabilities = torch.tensor([0.67, 0.11, 0.11, 0.11])
    labels = torch.multinomial(probabilities, size, replacement=True, generator=generator)
    inputs = centers[labels] + 1.2 * torch.randn(size, FEATURES, generator=generator)
    return TensorDataset(inputs, labels)


def balanced_sampler(dataset: TensorDataset) -> WeightedRandomSampler:
    labels = dataset.tensors[1]
    class_weights = 1.0 / torch.bincount(labels, minlength=CLASSES).double()
    return WeightedRandomSampler(class_weights[labels], num_samples=len(dataset))


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    train_set = make_split(1200, seed=1)
    loader = DataLoader(train_set, batch_size=32, sampler=balanced_sampler(train_set))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for _ in range(3):
        for inputs, labels in loader:
            optimizer.zero_grad()
            criterion(model(inputs), labels).backward()
            optimizer.step()
    test_inputs, test_labels = make_split(1000, seed=2).tensors
    model.eval()
    with torch.no_grad():
        accuracy = (model(test_inputs).argmax(1) == test_labels).float().mean().item()
    print(f"held-out accuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
