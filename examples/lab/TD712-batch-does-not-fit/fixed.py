"""An image classifier planned for batch 1024 on an 8 GiB GPU, the first layer downsampling.

A stride-2 first block and a pooling layer bring the 64x64 images down to 16x16 before
the wide blocks, as ResNet-style stems do: the step at batch 1024 needs a fraction of the
memory, and `torchdoctor check fixed.py --forecast cuda --batch-sizes 1024
--device-memory 8GiB` finds that it fits.
"""

import torch
from torch import nn

# What `check --forecast cuda --batch-sizes 1024 --device-memory 8GiB` asks.
FORECAST = {"device": "cuda", "batch_sizes": (1024,), "device_memory": 8 * 2**30}


def block(channels_in: int, channels: int, stride: int = 1) -> nn.Module:
    return nn.Sequential(nn.Conv2d(channels_in, channels, 3, stride, padding=1, bias=False),
                         nn.BatchNorm2d(channels), nn.ReLU())


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(block(3, 64, stride=2), nn.MaxPool2d(2), block(64, 64),
                                      block(64, 64))
        self.head = nn.Linear(64, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).mean(dim=(2, 3)))


def make():
    torch.manual_seed(0)
    model = Classifier()
    generator = torch.Generator().manual_seed(1)
    batch = (torch.randn(4, 3, 64, 64, generator=generator),
             torch.randint(0, 10, (4,), generator=generator))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, batch, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, (images, labels), criterion, optimizer = make()
    for step in range(3):
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
