"""Shared by the conformance cases: a tiny seeded model, data and training step."""

import torch
from torch import nn


def model_and_optimizer(seed=0, dtype=torch.float32, optimizer="sgd"):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2)).to(dtype)
    if optimizer == "adam":
        return model, torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def batch(step, dtype=torch.float32):
    generator = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(16, 6, generator=generator).to(dtype)
    return x, x[:, :2].sum(dim=1, keepdim=True).expand(16, 2).contiguous()


def train(model, optimizer, steps=5, dtype=torch.float32):
    losses = []
    for step in range(steps):
        x, y = batch(step, dtype)
        optimizer.zero_grad()
        loss = (model(x) - y).abs().pow(2).float().mean()
        loss.backward()
        optimizer.step()
        losses.append(round(loss.item(), 5))
    return losses
