"""A small GAN trained with one optimizer over both parts, as TranAD trains its
adversarial variant: after the discriminator's loss is back-propagated, the generator's
gradients are cleared so that the step updates the discriminator alone; then the other
way round.

`model.generator.zero_grad()` sits between a backward and a step, but it clears one part
of the model the loop runs: the discriminator keeps its gradients and learns.
"""

import torch
from torch import nn


class TinyGAN(nn.Module):
    def __init__(self, features: int = 8) -> None:
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(features, 16), nn.ReLU(), nn.Linear(16, features))
        self.discriminator = nn.Sequential(nn.Linear(features, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        fake_x = self.generator(x)
        real = self.discriminator(x)
        fake = self.discriminator(fake_x)
        return fake_x, real, fake


def train(model: TinyGAN, data: list[torch.Tensor], optimizer: torch.optim.Optimizer) -> float:
    bce = nn.BCEWithLogitsLoss()
    d_loss = torch.zeros(())
    for d in data:
        model.discriminator.zero_grad()
        _, real, fake = model(d)
        d_loss = bce(real, torch.ones_like(real)) + bce(fake, torch.zeros_like(fake))
        d_loss.backward()
        model.generator.zero_grad()
        optimizer.step()
        fake_x, _, fake = model(d)
        g_loss = bce(fake, torch.ones_like(fake)) + nn.functional.mse_loss(fake_x, d)
        g_loss.backward()
        model.discriminator.zero_grad()
        optimizer.step()
    return d_loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    gan = TinyGAN()
    before = [p.detach().clone() for p in gan.discriminator.parameters()]
    loss = train(gan, [torch.randn(16, 8) for _ in range(5)], torch.optim.SGD(gan.parameters(), 0.1))
    moved = any(not torch.equal(a, b) for a, b in zip(before, gan.discriminator.parameters()))
    print(f"discriminator loss {loss:.3f}; discriminator moved: {moved}")
