"""A compressing autoencoder that rounds its code to 16 levels inside the forward.

`torch.round` has a derivative of zero everywhere, so no gradient reaches the encoder:
its weights keep their initial values, and only the decoder learns to make the best of
a random code.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES, CODE = 32, 8


class Compressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CODE),
                                     nn.Tanh())
        self.decoder = nn.Sequential(nn.Linear(CODE, 64), nn.ReLU(), nn.Linear(64, FEATURES))

    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        code = torch.round(self.encoder(signal) * 8) / 8  # 16 levels in [-1, 1]
        return self.decoder(code)


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    basis = torch.randn(4, FEATURES, generator=generator)
    signal = torch.randn(size, 4, generator=generator) @ basis
    return TensorDataset(signal, signal)


def make():
    torch.manual_seed(0)
    model = Compressor()
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return model, loader, nn.MSELoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(5):
        for signal, target in loader:
            optimizer.zero_grad()
            loss = criterion(model(signal), target)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
