"""A GAN step that computes the generator's loss before the discriminator's update.

`g_loss` is built through `D(fake)`, then `opt_d.step()` updates D's weights in place,
and only then `g_loss.backward()` runs through the graph that saved the old weights:
PyTorch raises "one of the variables needed for gradient computation has been modified
by an inplace operation" at the first step.
"""

import torch
from torch import nn

Z_DIM = 8


def main() -> None:
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(Z_DIM, 32), nn.ReLU(), nn.Linear(32, 2))
    D = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    data = torch.randn(512, 2) * 0.5 + 2.0
    for epoch in range(2):
        for real in data.split(64):
            ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
            fake = G(torch.randn(len(real), Z_DIM))
            d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
            g_loss = bce(D(fake), ones)
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            g_loss.backward()  # expect: TD228
            opt_g.step()
        print(f"epoch {epoch}: d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f}")


if __name__ == "__main__":
    main()
