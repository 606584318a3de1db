"""A randomly initialised encoder adapted to many-channel input by replacing its first weight.

Without pretrained weights the patch assigns the layer a new parameter made in place from
`torch.Tensor(shape)` and then calls the layer's `reset_parameters()`, which draws every
value of the new weight: nothing reads the raw memory. `torch.empty` would say so without
the legacy constructor.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def patch_first_conv(model: nn.Module, in_channels: int) -> None:
    conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    conv.in_channels = in_channels
    conv.weight = nn.Parameter(
        torch.Tensor(conv.out_channels, in_channels // conv.groups, *conv.kernel_size)  # expect: TD105
    )
    conv.reset_parameters()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 2),
    )
    patch_first_conv(model, in_channels=5)
    data = TensorDataset(torch.randn(32, 5, 8, 8), torch.randint(0, 2, (32,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, labels in DataLoader(data, batch_size=8, shuffle=True):
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
