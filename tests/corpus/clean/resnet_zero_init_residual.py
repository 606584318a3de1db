"""A small ResNet with torchvision's `zero_init_residual=True` initialisation.

The last BatchNorm of every residual block starts with weight 0, so each block starts as
the identity (Goyal et al., 2017; torchvision reports +0.2-0.3% top-1). At the very first
step the convolutions inside the blocks therefore get an exactly-zero gradient; they start
learning as soon as the zero-initialised BatchNorm weights move. SGD with Nesterov
momentum, weight decay and cosine annealing per epoch, channels-last memory format.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(out)))


class ResNet(nn.Module):
    def __init__(self, classes=4, width=16, blocks=2, zero_init_residual=True):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.Sequential(*[BasicBlock(width) for _ in range(blocks)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if zero_init_residual:
            for block in self.blocks:
                nn.init.zeros_(block.bn2.weight)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def make_dataset(n=256, seed=50):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=generator)
    images = 0.5 * torch.randn(n, 3, 12, 12, generator=generator)
    # Classes 0-2 brighten one colour channel; class 3 darkens all three.
    tint = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [-1.0, -1.0, -1.0]])
    return TensorDataset(images + tint[labels].view(n, 3, 1, 1), labels)


def build():
    model = ResNet().to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    return model, optimizer


def make():
    torch.manual_seed(0)
    model, optimizer = build()
    return model, make_dataset(64).tensors, nn.CrossEntropyLoss(), optimizer


def main():
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    loader = DataLoader(make_dataset(), batch_size=32, shuffle=True, drop_last=True)
    model, optimizer = build()
    epochs = 3
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for images, labels in loader:
            images = images.to(memory_format=torch.channels_last)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
