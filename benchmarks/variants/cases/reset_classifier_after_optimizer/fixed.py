"""Fine-tuning a small pretrained-style backbone to a new label set. The
model class offers reset_classifier(num_classes), as timm models do, and
the training recipe builds the optimizer from a shared helper."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Backbone(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten())
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.stem(x))

    def reset_classifier(self, num_classes):
        self.fc = nn.Linear(self.fc.in_features, num_classes)


def make_glyphs(n, seed, n_classes):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, n_classes, (n,), generator=g)
    img = 0.3 * torch.randn(n, 1, 12, 12, generator=g)
    rows, cols = y % 4, y // 4
    for i in range(n):
        img[i, 0, 3 * rows[i]:3 * rows[i] + 3, :] += 1.0
        img[i, 0, :, 4 * cols[i]:4 * cols[i] + 4] += 1.0
    return img, y


def make_optimizer(model, lr):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)


def setup(n_classes):
    x, y = make_glyphs(2000, seed=1, n_classes=n_classes)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = Backbone()
    model.reset_classifier(n_classes)
    optimizer = make_optimizer(model, lr=0.05)
    return model, loader, F.cross_entropy, optimizer


def main():
    torch.manual_seed(0)
    model, loader, loss_fn, optimizer = setup(n_classes=12)
    xv, yv = make_glyphs(600, seed=2, n_classes=12)
    for epoch in range(4):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} val_acc={acc:.3f}")


if __name__ == "__main__":
    main()
