"""A critic trained with weight clipping (as in the original WGAN), clipped at the wrong time.

The clipping runs after the loss is computed and before `backward()`. It goes through
`.data`, so autograd does not notice that the weights it saved for the backward pass have
changed: the gradients are computed from the clipped weights for a loss computed with the
unclipped ones, silently wrong.
"""

import torch
from torch import nn

CLIP = 0.05


def make_critic() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64),
                         nn.LeakyReLU(0.2), nn.Linear(64, 1))


def main() -> None:
    torch.manual_seed(0)
    critic = make_critic()
    optimizer = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
    for step in range(200):
        real = torch.randn(128, 2) * 0.5 + torch.tensor([2.0, 0.0])
        fake = torch.randn(128, 2)
        optimizer.zero_grad()
        loss = critic(fake).mean() - critic(real).mean()
        for p in critic.parameters():
            p.data.clamp_(-CLIP, CLIP)  # expect: TD207
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: critic loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
