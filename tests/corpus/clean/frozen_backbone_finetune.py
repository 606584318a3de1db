"""Fine-tuning a new head on a frozen, pretrained-style backbone.

The backbone's parameters are frozen with `requires_grad_(False)` and only the head's
parameters go to the optimizer. The backbone also stays in eval mode (its BatchNorm
statistics are frozen too) by overriding `train()`.
"""

import torch
from torch import nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )

    def forward(self, x):
        return self.layers(x)


class FineTuner(nn.Module):
    def __init__(self, backbone, classes):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(32, classes)
        self.backbone.requires_grad_(False)

    def train(self, mode=True):
        super().train(mode)
        self.backbone.eval()
        return self

    def forward(self, x):
        return self.head(self.backbone(x))


def make_batch(generator, size=48):
    labels = torch.randint(0, 4, (size,), generator=generator)
    images = torch.randn(size, 3, 16, 16, generator=generator)
    # Classes 0-2 get a brighter colour channel; class 3 none.
    images += nn.functional.one_hot(labels, 4)[:, :3].float().view(size, 3, 1, 1)
    return images, labels


def make():
    torch.manual_seed(0)
    model = FineTuner(Backbone(), classes=4)
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.05, momentum=0.9)
    batch = make_batch(torch.Generator().manual_seed(13))
    return model, batch, nn.CrossEntropyLoss(), optimizer


def main():
    model, _, criterion, optimizer = make()
    generator = torch.Generator().manual_seed(14)
    model.train()
    for step in range(40):
        images, labels = make_batch(generator)
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable parameters: {trainable}")


if __name__ == "__main__":
    main()
