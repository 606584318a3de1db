"""A siamese signature verifier whose distance has a finite slope at 0 (an epsilon in sqrt)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 16


class Siamese(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        difference = self.encoder(first) - self.encoder(second)
        return torch.sqrt((difference ** 2).sum(dim=1) + 1e-12)


def contrastive_loss(distance: torch.Tensor, same: torch.Tensor, margin: float = 2.0
                     ) -> torch.Tensor:
    apart = torch.clamp(margin - distance, min=0)
    return (same * distance ** 2 + (1 - same) * apart ** 2).mean()


def make_dataset(size: int = 256) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    first = torch.randn(size, FEATURES, generator=generator)
    same = (torch.rand(size, generator=generator) < 0.5).float()
    noise = 0.1 * torch.randn(size, FEATURES, generator=generator)
    second = torch.where(same[:, None] > 0, first + noise, torch.randn(size, FEATURES,
                                                                        generator=generator))
    second[::8] = first[::8]  # the same scan submitted twice
    same[::8] = 1.0
    return TensorDataset(first, second, same)


def make():
    torch.manual_seed(0)
    model = Siamese()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, loader, contrastive_loss, optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(3):
        for first, second, same in loader:
            optimizer.zero_grad()
            loss = criterion(model(first, second), same)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
