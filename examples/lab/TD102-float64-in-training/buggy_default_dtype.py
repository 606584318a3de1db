"""A small text-embedding regressor that turns on float64 for the whole program.

`torch.set_default_dtype(torch.float64)` makes every parameter, activation, gradient and
Adam state float64. The only small numbers here are guards against division by zero
(`eps=1e-8` in Adam, `eps=1e-12` in LayerNorm, `+ 1e-12` in a normalisation), which work
in float32 just as well: nothing asks for float64's precision, so it is a warning.
"""

import torch
from torch import nn

VOCAB, WIDTH = 100, 32


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, WIDTH)
        self.norm = nn.LayerNorm(WIDTH, eps=1e-12)
        self.head = nn.Linear(WIDTH, 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pooled = self.embed(tokens)
        pooled = pooled / (pooled.norm(dim=1, keepdim=True) + 1e-12)
        return self.head(self.norm(pooled)).squeeze(-1)


def main() -> None:
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)  # expect: TD102
    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-8)
    tokens = torch.randint(0, VOCAB, (256, 12))
    targets = (tokens < 50).sum(dim=1).to(torch.get_default_dtype()) / 12
    for epoch in range(5):
        for start in range(0, 256, 32):
            optimizer.zero_grad()
            loss = (model(tokens[start : start + 32]) - targets[start : start + 32]).pow(2).mean()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f} ({loss.dtype})")


if __name__ == "__main__":
    main()
