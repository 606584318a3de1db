"""WGAN: `--n-critic` (default 5) critic steps per generator step, no sigmoid; the critic
is kept 1-Lipschitz by weight clipping (RMSprop, the original WGAN) or, with
`--gradient-penalty 10`, by a gradient penalty (WGAN-GP, Adam with betas (0, 0.9)).

Clipping runs in place under `torch.no_grad()` after each critic step. The penalty is the
gradient of the critic's output with respect to interpolated samples, taken with
`torch.autograd.grad(..., create_graph=True)` so that it can itself be backpropagated.
While the generator trains, the critic is frozen with `requires_grad_(False)` (the
CycleGAN `set_requires_grad` idiom), so its parameters get no gradient in that pass.
The critic's loss estimates the Wasserstein distance and is expected to move in both
directions.
"""

import argparse

import torch
from torch import nn

LATENT = 4
CLIP = 0.05


def set_requires_grad(module, flag):
    for parameter in module.parameters():
        parameter.requires_grad_(flag)


def real_batch(generator, size=64):
    return torch.randn(size, 2, generator=generator) * torch.tensor([0.5, 2.0]) + torch.tensor([1.0, -1.0])


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.shape[0], 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    (gradients,) = torch.autograd.grad(scores.sum(), mixed, create_graph=True)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-critic", type=int, default=5, help="critic steps per generator step")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--gradient-penalty", type=float, default=0.0, help="WGAN-GP weight; 0 clips weights")
    args = parser.parse_args()

    torch.manual_seed(0)
    data_rng = torch.Generator().manual_seed(47)
    generator_net = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, 2))
    critic = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    if args.gradient_penalty > 0:
        opt_g = torch.optim.Adam(generator_net.parameters(), lr=1e-3, betas=(0.0, 0.9))
        opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.0, 0.9))
    else:
        opt_g = torch.optim.RMSprop(generator_net.parameters(), lr=5e-4)
        opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)

    for iteration in range(args.iterations):
        set_requires_grad(critic, True)
        for _ in range(args.n_critic):
            real = real_batch(data_rng)
            with torch.no_grad():
                fake = generator_net(torch.randn(real.shape[0], LATENT))
            opt_c.zero_grad()
            loss_c = critic(fake).mean() - critic(real).mean()
            if args.gradient_penalty > 0:
                loss_c = loss_c + args.gradient_penalty * gradient_penalty(critic, real, fake)
            loss_c.backward()
            opt_c.step()
            if args.gradient_penalty == 0:
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
