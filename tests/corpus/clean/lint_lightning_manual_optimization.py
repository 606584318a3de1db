"""A GAN in Lightning with manual optimization: two optimizers, stepped by hand."""

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F


class GAN(L.LightningModule):
    def __init__(self, latent: int = 8, features: int = 4) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.latent = latent
        self.generator = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, features))
        self.discriminator = nn.Sequential(
            nn.Linear(features, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)
        )

    def training_step(self, batch, batch_idx):
        (real,) = batch
        opt_g, opt_d = self.optimizers()
        noise = torch.randn(real.size(0), self.latent, device=self.device)

        fake = self.generator(noise)
        ones = torch.ones(real.size(0), 1, device=self.device)
        g_loss = F.binary_cross_entropy_with_logits(self.discriminator(fake), ones)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()

        zeros = torch.zeros(real.size(0), 1, device=self.device)
        d_real = F.binary_cross_entropy_with_logits(self.discriminator(real), ones)
        d_fake = F.binary_cross_entropy_with_logits(self.discriminator(fake.detach()), zeros)
        d_loss = (d_real + d_fake) / 2
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, prog_bar=True)

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
        return opt_g, opt_d


def main() -> None:
    L.seed_everything(0)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(256, 4) * 0.5 + 1.0)
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False).fit(GAN(), loader)


if __name__ == "__main__":
    main()
