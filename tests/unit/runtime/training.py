"""Tiny seeded models, data and loops for runtime tests (a few milliseconds per step)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def batch(n: int = 32, features: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable 3-class problem: the class depends on the signs of two features."""
    x = torch.randn(n, features)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def mlp(dropout: float = 0.0, batchnorm: bool = False) -> nn.Sequential:
    """8 -> 32 -> 3, with optional BatchNorm and Dropout."""
    layers: list[nn.Module] = [nn.Linear(8, 32)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(32))
    layers.append(nn.ReLU())
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(32, 3))
    return nn.Sequential(*layers)


def step(model: nn.Module, optimizer: torch.optim.Optimizer, *, clear: bool = True) -> Any:
    """One ordinary training step; returns the loss tensor."""
    x, y = batch()
    if clear:
        optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss
