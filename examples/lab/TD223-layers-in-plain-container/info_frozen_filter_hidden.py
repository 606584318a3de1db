"""A denoiser with a fixed low-pass filter kept in a plain list, on purpose.

The filter's convolution is frozen and its weight is built from a registered buffer, so
leaving it out of `parameters()` and `state_dict()` loses nothing: it is never trained
and is rebuilt from the saved buffer. `forward` moves it to the input's device itself.
Only `.to()`/`.half()` pass it by, which is why the finding stays as information.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LowPass(nn.Module):
    def __init__(self, channels: int, taps: int = 5) -> None:
        super().__init__()
        self.register_buffer("taps", torch.full((1, 1, taps), 1.0 / taps))
        self.conv = [  # expect: TD223
            nn.Conv1d(channels, channels, taps, padding=taps // 2, groups=channels, bias=False)
        ]
        self.conv[0].weight = nn.Parameter(self.taps.expand(channels, -1, -1).clone())
        self.conv[0].requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv[0].weight.device != x.device:
            self.conv[0] = self.conv[0].to(x.device)
        return self.conv[0](x)


class Denoiser(nn.Module):
    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.smooth = LowPass(channels)
        self.mix = nn.Conv1d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mix(self.smooth(x))


def main() -> None:
    torch.manual_seed(0)
    model = Denoiser()
    clean = torch.randn(64, 4, 32)
    data = TensorDataset(clean + 0.1 * torch.randn_like(clean), clean)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for noisy, target in DataLoader(data, batch_size=16, shuffle=True):
        loss = nn.functional.mse_loss(model(noisy), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"trained {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
