"""A metric-learning loss that means to keep its learnable scale positive, but doesn't.

`torch.clamp(self.scale, 1e-6)` and `F.normalize(embeddings)` return new tensors: as
statements they change nothing. The scale is never clamped (it can cross zero and flip
the sign of every similarity), and the embeddings stay unnormalised.
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
        torch.clamp(self.scale, 1e-6)  # expect: TD224
        F.normalize(anchors)  # expect: TD224
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
