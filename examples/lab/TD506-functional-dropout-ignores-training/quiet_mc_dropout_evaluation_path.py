"""A classifier head with Monte-Carlo dropout: in training mode it returns after one
dropped pass; in evaluation it averages many dropout samples and reports how much they
disagree.

The code tests `self.training` and leaves on the training side, so the dropout after
that test runs in evaluation on purpose: it is the method, not a forgotten flag.
"""

import torch
import torch.nn.functional as F
from torch import nn


class MCDropoutHead(nn.Module):
    def __init__(self, features: int, classes: int, rate: float = 0.2, samples: int = 16):
        super().__init__()
        self.linear = nn.Linear(features, classes)
        self.rate = rate
        self.samples = samples

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.training:
            return {"logits": self.linear(F.dropout(x, self.rate, training=True))}
        draws = torch.stack(
            [self.linear(F.dropout(x, self.rate)) for _ in range(self.samples)], dim=1
        )
        votes = draws.argmax(-1)
        agreement = (votes == votes.mode(dim=1).values.unsqueeze(1)).float().mean(1)
        return {"logits": draws.mean(1), "var_ratio": 1.0 - agreement}


if __name__ == "__main__":
    torch.manual_seed(0)
    head = MCDropoutHead(features=8, classes=3)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    inputs, labels = torch.randn(64, 8), torch.randint(0, 3, (64,))
    for _ in range(20):
        optimizer.zero_grad()
        F.cross_entropy(head(inputs)["logits"], labels).backward()
        optimizer.step()
    head.eval()
    out = head(inputs)
    print(f"mean var ratio {out['var_ratio'].mean():.3f}")
