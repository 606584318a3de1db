"""A sharding loop that takes each block of the model in turn, wraps it and compiles its
forward: `layer = model.blocks[idx]` is a different block on every iteration, so each
forward is compiled once."""

import torch
from torch import nn


def compile_blocks(model: nn.Module) -> None:
    for idx in range(len(model.blocks)):
        layer = model.blocks[idx]
        layer.forward = torch.compile(layer.forward)
        model.blocks[idx] = layer


if __name__ == "__main__":
    model = nn.Module()
    model.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
    compile_blocks(model)
    print(len(model.blocks))
