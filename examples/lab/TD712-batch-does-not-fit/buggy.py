"""An image classifier planned for batch 1024 on an 8 GiB GPU, every layer at full resolution.

The three 64-channel blocks run at the input's 64x64 pixels, so each keeps 2 GiB for
backward at batch 1024: the step peaks at 8 GiB, more than an 8 GiB card can give it
(its CUDA context takes some), and the run dies of an out-of-memory error at its first
step. `torchdoctor check buggy.py --forecast cuda --batch-sizes 1024 --device-memory 8GiB`
says so before the launch.
"""

import torch
from torch import nn

# What `check --forecast cuda --batch-sizes 1024 --device-memory 8GiB` asks.
FORECAST = {"device": "cuda", "batch_sizes": (1024,), "device_memory": 8 * 2**30}


def block(channels_in: int, channels: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(channels_in, channels, 3, padding=1, bias=False),
                         nn.BatchNorm2d(channels), nn.ReLU())


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(block(3, 64), block(64, 64), block(64, 64))  # expect: TD712
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
