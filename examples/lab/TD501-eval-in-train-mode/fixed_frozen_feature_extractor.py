"""Features extracted once by a frozen encoder whose constructor ends in `self.eval()`.

The encoder builds its backbone and its projection, then puts itself in eval mode: every
layer, dropout included, is in eval mode when the features are extracted under
`no_grad`, with no `eval()` needed at the call site.
"""

import torch
from torch import nn


class FrozenEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32))
        self.projection = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 8))
        self.eval()
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.backbone(x))


def build_encoder() -> nn.Module:
    return FrozenEncoder()


def main() -> None:
    torch.manual_seed(0)
    encoder = build_encoder()
    features = []
    with torch.no_grad():
        for batch in torch.randn(4, 10, 16):
            features.append(encoder(batch))
    print(torch.cat(features).std().item())


if __name__ == "__main__":
    main()
