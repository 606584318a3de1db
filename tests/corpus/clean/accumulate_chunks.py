"""A large batch split into micro-batches inside one optimizer step.

Each batch is cut with `chunk()`; every chunk's loss is weighted by its share of the
batch and backpropagated, then one step is taken. The running loss is accumulated as a
detached tensor and read once per epoch.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

MICRO_BATCHES = 4


def make_loader():
    generator = torch.Generator().manual_seed(3)
    images = torch.randn(256, 1, 12, 12, generator=generator)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    return DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 2),
    )


def main():
    torch.manual_seed(0)
    loader = make_loader()
    model = build_model()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    for epoch in range(3):
        total = torch.zeros(())
        for images, labels in loader:
            model.zero_grad(set_to_none=True)
            for chunk_images, chunk_labels in zip(images.chunk(MICRO_BATCHES), labels.chunk(MICRO_BATCHES)):
                share = chunk_images.shape[0] / images.shape[0]
                loss = criterion(model(chunk_images), chunk_labels) * share
                loss.backward()
                total += loss.detach()
            optimizer.step()
        print(f"epoch {epoch}: mean loss {(total / len(loader)).item():.4f}")


if __name__ == "__main__":
    main()
