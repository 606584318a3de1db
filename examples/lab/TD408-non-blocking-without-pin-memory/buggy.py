"""Image-sized batches copied with non_blocking=True from a loader that does not pin memory.

From pageable memory the CUDA driver stages the copy through a pinned buffer on the CPU,
so the "asynchronous" copies below are neither asynchronous nor overlapped with compute.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 10


def make_dataset(size: int = 512) -> TensorDataset:
    images = torch.rand(size, 1, 16, 16)
    labels = torch.randint(0, NUM_CLASSES, (size,))
    return TensorDataset(images, labels)


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, NUM_CLASSES)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)  # expect: TD408
            labels = labels.to(device, non_blocking=True)  # expect: TD408
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
