"""A BEGAN-style GAN step: the discriminator's update, then the generator's.

The generator clears its gradients after the discriminator's backward, then computes its
own loss and calls `G_loss.backward()` before its step. `G_loss` is an alias of a loss
computed just above (`G_loss = D_fake_loss`), not a class: the step sees the
generator's gradients.
"""

import torch
from torch import nn


def train(epochs: int = 2, k: float = 0.0, gamma: float = 0.75, lambda_k: float = 0.001) -> None:
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    D = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 16))
    G_optimizer = torch.optim.Adam(G.parameters(), lr=1e-3)
    D_optimizer = torch.optim.Adam(D.parameters(), lr=1e-3)
    data = torch.rand(64, 16) * 2 - 1
    for epoch in range(epochs):
        for x in data.split(16):
            z = torch.rand(len(x), 8)
            D_optimizer.zero_grad()
            D_real_loss = torch.mean(torch.abs(D(x) - x))
            fake = G(z)
            D_fake_loss = torch.mean(torch.abs(D(fake.detach()) - fake.detach()))
            D_loss = D_real_loss - k * D_fake_loss
            D_loss.backward()
            D_optimizer.step()

            G_optimizer.zero_grad()
            fake = G(z)
            D_fake_loss = torch.mean(torch.abs(D(fake) - fake))
            G_loss = D_fake_loss
            G_loss.backward()
            G_optimizer.step()
            k = min(max(k + lambda_k * (gamma * D_real_loss.item() - G_loss.item()), 0.0), 1.0)
        print(f"epoch {epoch}: k={k:.4f}")


if __name__ == "__main__":
    train()
