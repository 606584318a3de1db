"""A hand-written momentum SGD under `torch.no_grad()`, with weight decay and the velocity
kept in a dict keyed by parameter name; gradients reset with `zero_()`."""

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    x = torch.randn(400, 5)
    y = (x[:, 0] * x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 2))
    velocity = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    lr, momentum, decay = 0.1, 0.9, 1e-4
    for step in range(80):
        batch = torch.randint(0, 400, (32,))
        loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
        loss.backward()
        with torch.no_grad():
            for name, p in model.named_parameters():
                velocity[name].mul_(momentum).add_(p.grad + decay * p)
                p -= lr * velocity[name]
                p.grad.zero_()
        if step % 20 == 19:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
