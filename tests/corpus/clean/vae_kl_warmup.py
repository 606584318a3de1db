"""A variational auto-encoder with a KL warm-up (beta annealed from 0 to 1).

The decoder returns logits and the reconstruction term is
`binary_cross_entropy_with_logits(..., reduction="sum")` per batch, divided by the batch
size, as in the classic VAE example; `torch.sigmoid` is applied only when sampling.
The forward returns a tuple `(logits, mu, logvar)` and the loss takes it whole. The
latent is sampled only in training mode; in eval mode the forward decodes the mean, so
evaluation is deterministic, and sampling is an explicit method.
"""

import torch
import torch.nn.functional as F
from torch import nn

PIXELS = 64
LATENT = 4
WARMUP_STEPS = 60


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(PIXELS, 64), nn.ReLU())
        self.mu = nn.Linear(64, LATENT)
        self.logvar = nn.Linear(64, LATENT)
        self.decoder = nn.Sequential(nn.Linear(LATENT, 64), nn.ReLU(), nn.Linear(64, PIXELS))

    def forward(self, x):
        hidden = self.encoder(x)
        mu, logvar = self.mu(hidden), self.logvar(hidden)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if self.training else mu
        return self.decoder(z), mu, logvar

    @torch.no_grad()
    def sample(self, n):
        return torch.sigmoid(self.decoder(torch.randn(n, LATENT)))


def vae_loss(output, target, beta=1.0):
    logits, mu, logvar = output
    reconstruction = F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (reconstruction + beta * kl) / target.shape[0]


def make_images(generator, n=64):
    """Binary 8x8 images: one random horizontal and one random vertical bar."""
    images = torch.zeros(n, 8, 8)
    rows = torch.randint(0, 8, (n,), generator=generator)
    cols = torch.randint(0, 8, (n,), generator=generator)
    images[torch.arange(n), rows, :] = 1.0
    images[torch.arange(n), :, cols] = 1.0
    return images.view(n, PIXELS)


def make():
    torch.manual_seed(0)
    model = VAE()
    images = make_images(torch.Generator().manual_seed(39))
    return model, (images, images), vae_loss, torch.optim.Adam(model.parameters(), lr=3e-3)


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(40)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(150):
        images = make_images(generator)
        beta = min(1.0, step / WARMUP_STEPS)
        optimizer.zero_grad()
        loss = vae_loss(model(images), images, beta=beta)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f} (beta {beta:.2f})")
    model.eval()
    print("sample mean intensity", model.sample(8).mean().item())


if __name__ == "__main__":
    main()
