"""Three correct orders around two optimizers.

The generator steps first and the discriminator's loss, computed before that step, reads
the generator only through `fake.detach()`; two independent models each back-propagate a
loss computed before the other's step; and a loss recomputed after the step.
"""

import torch
from torch import nn


def gan_generator_first(G: nn.Module, D: nn.Module, loader: list[torch.Tensor]) -> None:
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    for real in loader:
        ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
        fake = G(torch.randn(len(real), 8))
        d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        g_loss = bce(D(fake), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()


def two_models(encoder: nn.Module, probe: nn.Module, loader: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    opt_encoder = torch.optim.SGD(encoder.parameters(), lr=0.1)
    opt_probe = torch.optim.SGD(probe.parameters(), lr=0.1)
    for x, y in loader:
        features = encoder(x)
        recon_loss = nn.functional.mse_loss(features, x)
        probe_loss = nn.functional.cross_entropy(probe(features.detach()), y)
        opt_encoder.zero_grad()
        recon_loss.backward()
        opt_encoder.step()
        opt_probe.zero_grad()
        probe_loss.backward()
        opt_probe.step()


def recomputed(G: nn.Module, D: nn.Module, loader: list[torch.Tensor]) -> None:
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    for real in loader:
        fake = G(torch.randn(len(real), 8))
        g_loss = -D(fake).mean()
        d_loss = D(fake.detach()).mean() - D(real).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = -D(fake).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
