"""Softmax inside the model is not softmax before the loss.

A hand-written self-attention block (softmax over attention scores), attention pooling
(softmax over positions) and a soft mixture of two expert heads (softmax gate) all use
softmax internally; the model still returns raw logits to CrossEntropyLoss.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return x + self.proj(weights @ v)


class AttentionPoolingClassifier(nn.Module):
    def __init__(self, features=6, dim=32, classes=3):
        super().__init__()
        self.embed = nn.Linear(features, dim)
        self.attention = SelfAttention(dim)
        self.score = nn.Linear(dim, 1)
        self.experts = nn.ModuleList([nn.Linear(dim, classes) for _ in range(2)])
        self.gate = nn.Linear(dim, 2)

    def forward(self, x):
        hidden = self.attention(torch.relu(self.embed(x)))
        pool_weights = F.softmax(self.score(hidden), dim=1)
        pooled = (pool_weights * hidden).sum(dim=1)
        gate = F.softmax(self.gate(pooled), dim=-1)
        expert_logits = torch.stack([expert(pooled) for expert in self.experts], dim=-1)
        return (expert_logits * gate.unsqueeze(1)).sum(dim=-1)


def set_batch(generator, size=48, length=10):
    """A set of 10 points; the label is which of the first 3 features has the largest max."""
    x = torch.randn(size, length, 6, generator=generator)
    return x, x[..., :3].amax(dim=1).argmax(dim=1)


def make():
    torch.manual_seed(0)
    model = AttentionPoolingClassifier()
    return (model, set_batch(torch.Generator().manual_seed(45), size=64), nn.CrossEntropyLoss(),
            torch.optim.Adam(model.parameters(), lr=3e-3))


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(46)
    model = AttentionPoolingClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for step in range(80):
        x, y = set_batch(generator)
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            confidence = logits.softmax(dim=-1).amax(dim=-1).mean()
            print(f"step {step}: loss {loss.item():.4f} mean confidence {confidence.item():.2f}")


if __name__ == "__main__":
    main()
