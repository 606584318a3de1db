"""Attention whose dropout rate is written as a conditional on the module's mode: the
rate is the configured one in training and 0 in evaluation, so `model.eval()` turns the
dropout off although `training=` is not passed.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int = 8, dropout_p: float = 0.1) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.dropout_p = dropout_p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        weights = F.dropout(scores, self.dropout_p if self.training else 0.0)
        return weights @ v


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Attention().eval()
    x = torch.randn(2, 5, 8)
    print("deterministic in eval:", torch.equal(model(x), model(x)))
