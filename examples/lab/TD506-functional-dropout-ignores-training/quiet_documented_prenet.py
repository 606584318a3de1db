"""A Tacotron 2 style prenet whose docstring says its dropout stays on in evaluation:
the paper keeps the prenet's dropout at inference to vary the decoder's input.

`F.dropout` without `training=` is the intent here, written down where the module is.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Prenet(nn.Module):
    """Two linear layers with ReLU. This module always applies dropout, even in
    evaluation, as Tacotron 2's prenet does."""

    def __init__(self, features: int, units: int = 32, rate: float = 0.5) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(features, units), nn.Linear(units, units)])
        self.rate = rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), self.rate)
        return x


if __name__ == "__main__":
    torch.manual_seed(0)
    prenet = Prenet(8).eval()
    x = torch.randn(4, 8)
    print("two evaluations differ:", not torch.equal(prenet(x), prenet(x)))
