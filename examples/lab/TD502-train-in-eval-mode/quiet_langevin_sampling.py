"""Sampling from an energy-based model by Langevin dynamics.

Training fits the energy network in training mode. Sampling then puts it in eval mode
and, for every batch of starting points, follows the energy's gradient with respect to
the *inputs*: ``backward()`` runs through the network, but no optimizer steps and the
network's weights never change. Eval mode is what sampling wants.
"""

import torch
from torch import nn


def train(energy: nn.Module, data: torch.Tensor, steps: int) -> None:
    optimizer = torch.optim.Adam(energy.parameters(), lr=1e-3)
    energy.train()
    for _ in range(steps):
        fake = torch.rand_like(data)
        loss = energy(data).mean() - energy(fake).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def sample(energy: nn.Module, starts: list[torch.Tensor], steps: int) -> list[torch.Tensor]:
    samples = []
    for start in starts:
        x = start.clone().requires_grad_(True)
        energy.eval()
        for _ in range(steps):
            out = energy(x)
            out.sum().backward()
            with torch.no_grad():
                x -= 0.05 * x.grad + 0.01 * torch.randn_like(x)
            x.grad = None
        samples.append(x.detach())
    return samples


def main() -> None:
    torch.manual_seed(0)
    energy = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))
    train(energy, torch.randn(64, 2), steps=20)
    samples = sample(energy, [torch.rand(16, 2) for _ in range(3)], steps=10)
    print(f"{len(samples)} batches of samples, mean {torch.cat(samples).mean().item():.4f}")


if __name__ == "__main__":
    main()
