"""A small image autoencoder trained with the mean reconstruction error.

With the default `reduction="mean"` the gradient no longer grows with the number of
images and pixels, and the learning rate means what it says; Adam at 1e-3, the usual
autoencoder recipe, changes the weights by about 2% of their size on the first step.
"""

import torch
import torch.nn.functional as F
from torch import nn

CHANNELS = 3
SIZE = 16


class AutoEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(CHANNELS, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(16, CHANNELS, 4, stride=2, padding=1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(images))


def reconstruction_loss(reconstruction: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(reconstruction, images)


def make_images(count: int = 64) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    coarse = torch.randn(count, CHANNELS, 4, 4, generator=generator)
    return F.interpolate(coarse, size=SIZE, mode="bilinear", align_corners=False)


def make():
    torch.manual_seed(0)
    model = AutoEncoder()
    images = make_images()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, (images, images), reconstruction_loss, optimizer


def main() -> None:
    model, (images, _), loss_fn, optimizer = make()
    for step in range(20):
        optimizer.zero_grad()
        loss = loss_fn(model(images), images)
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4g}")


if __name__ == "__main__":
    main()
