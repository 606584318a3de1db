"""A transformer that declares a parameter with the legacy constructor and leaves filling
it to its base's `init_weights`, which it calls through `super()`.

The base lives in another module (`_detr_base.py`, as mmdet's lives in mmdet), so lint
cannot see that it draws `normal_(self.level_embeds)`; the class does call it, so the
memory is filled before use. Only the spelling is legacy.
"""

import torch
from _detr_base import DetrTransformerBase
from torch import nn


class DinoTransformer(DetrTransformerBase):
    def __init__(self, levels: int, dim: int, queries: int) -> None:
        super().__init__()
        self.level_embeds = nn.Parameter(torch.Tensor(levels, dim))  # expect: TD105
        self.query_embed = nn.Embedding(queries, dim)

    def init_weights(self) -> None:
        super().init_weights()
        nn.init.normal_(self.query_embed.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.level_embeds.sum(0)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = DinoTransformer(levels=4, dim=8, queries=3)
    model.init_weights()
    print(model(torch.zeros(2, 8)).shape, bool(torch.isfinite(model.level_embeds).all()))
