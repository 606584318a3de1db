"""A text encoder that keeps a frozen pretrained embedding table out of its parameters.

The table is kept in a plain list on purpose and frozen with
`self.pretrained[0].weight.requires_grad = False`: it stays out of `parameters()`, the
optimizer and the checkpoint (the script sets it again after loading), and only the
projection above it trains. True, and left as the author chose: information.
"""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vectors: torch.Tensor, width: int) -> None:
        super().__init__()
        self.pretrained = [nn.Embedding(*vectors.shape)]  # expect: TD223
        self.pretrained[0].weight.data = vectors
        self.pretrained[0].weight.requires_grad = False
        self.projection = nn.Linear(vectors.shape[1], width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.projection(self.pretrained[0](tokens))


def main() -> None:
    torch.manual_seed(0)
    encoder = Encoder(torch.randn(50, 12), 8)
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    tokens, targets = torch.randint(0, 50, (16, 5)), torch.randn(16, 5, 8)
    for _ in range(10):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(encoder(tokens), targets)
        loss.backward()
        optimizer.step()
    print(round(loss.item(), 4))


if __name__ == "__main__":
    main()
