"""Label smoothing plus mixup: CrossEntropyLoss with `label_smoothing` and soft targets.

Mixup blends two examples and their one-hot labels; `nn.CrossEntropyLoss` accepts class
probabilities as targets (float, same shape as the logits) since PyTorch 1.10.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 4


def make_dataset(n=256, seed=28):
    generator = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=generator)
    x = torch.randn(n, 12, generator=generator) + nn.functional.one_hot(y, 12).float() * 2
    return TensorDataset(x, y)


def build_model():
    return nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, CLASSES))


def mixup(x, y, alpha=0.4):
    lam = torch.distributions.Beta(alpha, alpha).sample()
    index = torch.randperm(x.shape[0])
    targets = nn.functional.one_hot(y, CLASSES).float()
    return lam * x + (1 - lam) * x[index], lam * targets + (1 - lam) * targets[index]


def make():
    """One mixup batch: the targets are class probabilities of shape [N, CLASSES]."""
    torch.manual_seed(0)
    model = build_model()
    mixed_x, mixed_y = mixup(*make_dataset(64).tensors)
    return (model, (mixed_x, mixed_y), nn.CrossEntropyLoss(label_smoothing=0.1),
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))


def main():
    torch.manual_seed(0)
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True)
    model = build_model()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(4):
        model.train()
        for x, y in loader:
            mixed_x, mixed_y = mixup(x, y)
            optimizer.zero_grad()
            loss = criterion(model(mixed_x), mixed_y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
