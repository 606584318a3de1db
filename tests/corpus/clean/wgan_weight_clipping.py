"""WGAN with weight clipping: five critic steps per generator step, RMSprop, no sigmoid.

The critic's weights are clipped in place under `torch.no_grad()` after each critic step.
While the generator trains, the critic is frozen with `requires_grad_(False)` (the
CycleGAN `set_requires_grad` idiom), so its parameters get no gradient in that pass.
The critic's loss is an estimate of the Wasserstein distance, not a quantity that must
fall: it is expected to move in both directions.
"""

import torch
from torch import nn

LATENT = 4
N_CRITIC = 5
CLIP = 0.05


def set_requires_grad(module, flag):
    for parameter in module.parameters():
        parameter.requires_grad_(flag)


def real_batch(generator, size=64):
    return torch.randn(size, 2, generator=generator) * torch.tensor([0.5, 2.0]) + torch.tensor([1.0, -1.0])


def main():
    torch.manual_seed(0)
    data_rng = torch.Generator().manual_seed(47)
    generator_net = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, 2))
    critic = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    opt_g = torch.optim.RMSprop(generator_net.parameters(), lr=5e-4)
    opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)

    for iteration in range(40):
        set_requires_grad(critic, True)
        for _ in range(N_CRITIC):
            real = real_batch(data_rng)
            with torch.no_grad():
                fake = generator_net(torch.randn(real.shape[0], LATENT))
            opt_c.zero_grad()
            loss_c = critic(fake).mean() - critic(real).mean()
            loss_c.backward()
            opt_c.step()
            with torch.no_grad():
                for parameter in critic.parameters():
                    parameter.clamp_(-CLIP, CLIP)

        set_requires_grad(critic, False)
        opt_g.zero_grad()
        loss_g = -critic(generator_net(torch.randn(64, LATENT))).mean()
        loss_g.backward()
        opt_g.step()
        if iteration % 10 == 0:
            print(f"iteration {iteration}: critic {loss_c.item():.4f} generator {loss_g.item():.4f}")

    with torch.no_grad():
        samples = generator_net(torch.randn(1000, LATENT))
    print("sample mean", samples.mean(dim=0).tolist(), "std", samples.std(dim=0).tolist())


if __name__ == "__main__":
    main()
