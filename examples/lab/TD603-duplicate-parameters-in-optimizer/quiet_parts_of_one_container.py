"""A search network whose optimizer gives one stage of a ModuleList its own learning rate
and the stages after it the default: `super_layers[idx]` and `super_layers[idx + 1:]` are
different parts of one container, so no parameter appears twice."""

import torch
from torch import nn


def build_optimizer(net: nn.Module, idx: int, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(
        [
            {"params": net.stem.parameters()},
            {"params": net.super_layers[idx].parameters(), "lr": lr * 0.1},
            {"params": net.super_layers[idx + 1 :].parameters()},
            {"params": net.head.parameters()},
        ],
        lr=lr,
        momentum=0.9,
    )


if __name__ == "__main__":
    net = nn.Module()
    net.stem = nn.Linear(4, 8)
    net.super_layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))
    net.head = nn.Linear(8, 2)
    print(len(build_optimizer(net, 1, 0.1).param_groups))
