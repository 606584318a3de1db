"""Fixed: the gradients are cleared once per step, before `backward()`."""

import torch
from torch import nn

FEATURES, CLASSES = 64, 10


def make_data(count: int = 3200) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    centres = torch.randn(CLASSES, FEATURES, generator=generator) * 2
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    return centres[labels] + torch.randn(count, FEATURES, generator=generator), labels


def main() -> None:
    torch.manual_seed(0)
    images, labels = make_data()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, labels), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


def train_gan(steps: int = 20) -> float:
    """Two networks, two optimizers: each optimizer clears its own gradients."""
    generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, FEATURES))
    discriminator = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    real, _ = make_data(64 * steps)
    g_loss = torch.zeros(())
    for batch in real.split(64):
        opt_d.zero_grad()
        fake = generator(torch.randn(len(batch), 8))
        d_loss = nn.functional.softplus(discriminator(fake.detach())).mean() + \
            nn.functional.softplus(-discriminator(batch)).mean()
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = nn.functional.softplus(-discriminator(fake)).mean()
        g_loss.backward()
        opt_g.step()
    return g_loss.item()


class GanTrainer:
    """The same two-network step, split into methods."""

    def __init__(self) -> None:
        self.generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, FEATURES))
        self.critic = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
        self.opt_g = torch.optim.Adam(self.generator.parameters(), lr=1e-3)
        self.opt_d = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def critic_step(self, batch: torch.Tensor, fake: torch.Tensor) -> None:
        self.opt_d.zero_grad()
        loss = self.critic(fake.detach()).mean() - self.critic(batch).mean()
        loss.backward()
        self.opt_d.step()

    def generator_step(self, fake: torch.Tensor) -> None:
        self.opt_g.zero_grad()
        loss = -self.critic(fake).mean()
        loss.backward()
        self.opt_g.step()

    def fit(self, steps: int = 20) -> None:
        real, _ = make_data(64 * steps)
        for batch in real.split(64):
            fake = self.generator(torch.randn(len(batch), 8))
            self.critic_step(batch, fake)
            self.generator_step(fake)


if __name__ == "__main__":
    main()
