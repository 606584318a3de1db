"""An image classifier trained on a GPU from a DataLoader that pins its batches.

With `pin_memory=True` the workers' batches land in page-locked memory, the copies to the
GPU run at full speed and `non_blocking=True` overlaps them with compute. This example
needs a CUDA device.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

REQUIRES_CUDA = True  # the lab test skips this example on machines without CUDA
CLASSES = 10


def make_dataset(size: int = 1024) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    images = torch.randn(size, 3, 32, 32, generator=generator)
    return TensorDataset(images, labels)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, CLASSES),
    )


def make():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = make_model().to(device)
    loader = DataLoader(make_dataset(), batch_size=128, shuffle=True, num_workers=2,
                        persistent_workers=True, pin_memory=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return {"model": model, "data": loader, "loss_fn": nn.CrossEntropyLoss(),
            "optimizer": optimizer, "device": device}


def main() -> None:
    setup = make()
    model, loader, device = setup["model"], setup["data"], setup["device"]
    criterion, optimizer = setup["loss_fn"], setup["optimizer"]
    for epoch in range(2):
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
