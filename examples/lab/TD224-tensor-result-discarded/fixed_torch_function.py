"""The same loss keeping its scale positive in place and using the normalised embeddings.

The scale is clamped in place under `torch.no_grad()` (a parameter's data, not a new
tensor), and the normalised embeddings are assigned.
"""

import torch
from torch import nn
from torch.nn import functional as F


class ScaledCosineLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(10.0))
        self.bias = nn.Parameter(torch.tensor(-5.0))

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.scale.clamp_(1e-6)
        anchors = F.normalize(anchors)
        similarity = anchors @ F.normalize(positives).T
        logits = similarity * self.scale + self.bias
        return F.cross_entropy(logits, torch.arange(len(anchors)))


def main() -> None:
    torch.manual_seed(0)
    encoder = nn.Linear(12, 8)
    criterion = ScaledCosineLoss()
    optimizer = torch.optim.SGD([*encoder.parameters(), *criterion.parameters()], lr=0.5)
    for _ in range(30):
        inputs = torch.randn(16, 12)
        optimizer.zero_grad()
        loss = criterion(encoder(inputs), encoder(inputs + 0.1 * torch.randn_like(inputs)))
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}, scale {criterion.scale.item():.3f}")


if __name__ == "__main__":
    main()
