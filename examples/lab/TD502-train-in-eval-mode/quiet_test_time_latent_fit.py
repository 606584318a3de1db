"""Reconstructing a shape with a trained auto-decoder: only the latent code is fitted.

At test time the decoder is frozen and put in eval mode (no dropout); an optimizer over
the latent code alone, a tensor the function makes, fits the code to the observed
samples. The backward pass runs through the decoder in eval mode on purpose: nothing of
the decoder is trained.
"""

import torch
from torch import nn


def reconstruct(decoder: nn.Module, samples: torch.Tensor, steps: int) -> torch.Tensor:
    latent = torch.ones(1, 8).normal_(mean=0, std=0.01)
    latent.requires_grad = True
    optimizer = torch.optim.Adam([latent], lr=5e-3)
    for _ in range(steps):
        decoder.eval()
        optimizer.zero_grad()
        inputs = torch.cat([latent.expand(len(samples), -1), samples[:, :3]], 1)
        loss = nn.functional.l1_loss(decoder(inputs), samples[:, 3:])
        loss.backward()
        optimizer.step()
    return latent.detach()


def main() -> None:
    torch.manual_seed(0)
    decoder = nn.Sequential(nn.Linear(11, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
    samples = torch.randn(128, 4)
    code = reconstruct(decoder, samples, steps=20)
    print(f"fitted latent code with norm {code.norm().item():.4f}")


if __name__ == "__main__":
    main()
