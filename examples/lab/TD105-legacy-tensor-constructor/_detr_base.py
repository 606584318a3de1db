"""The base of `info_unread_base_initialises.py`, kept in its own module the way a library
(mmdet, mmengine) keeps it: linting that file alone cannot read this one.

Its `init_weights` fills every parameter a subclass declares under the names it knows.
"""

import torch
from torch import nn


class DetrTransformerBase(nn.Module):
    level_embeds: nn.Parameter

    def init_weights(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.level_embeds)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
