"""Features extracted once by a frozen encoder whose constructor calls `self.eval()` too early.

The encoder puts itself in eval mode at the end of building its backbone, then adds a
projection with dropout. A module built after `eval()` starts in training mode, so the
projection's dropout stays on while the features are extracted under `no_grad`: every
saved feature has a random 20% of its entries zeroed and the rest scaled up.
"""

import torch
from torch import nn


class FrozenEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32))
        self.eval()
        self.projection = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 8))
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
            features.append(encoder(batch))  # expect[lint]: TD501
    print(torch.cat(features).std().item())


if __name__ == "__main__":
    main()
