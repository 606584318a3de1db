"""Adversarial training whose evaluation attacks the model too: each epoch starts with
`model.train()`, trains on PGD examples, then evaluates in eval mode on PGD examples made
by the same attack helper.

After `model.eval()` the attack still calls `backward()`, but only for the gradient of
its input perturbation; no optimizer steps until `train()` has been called again.
"""

import torch
from torch import nn


def attack_pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> torch.Tensor:
    delta = torch.zeros_like(x, requires_grad=True)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x + delta), y)
        loss.backward()
        with torch.no_grad():
            delta += 0.01 * delta.grad.sign()
            delta.clamp_(-0.03, 0.03)
        delta.grad.zero_()
    return delta.detach()


def run(epochs: int = 2) -> float:
    model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.2), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(16, 4), torch.randint(0, 3, (16,))) for _ in range(4)]
    accuracy = 0.0
    for _ in range(epochs):
        model.train()
        for x, y in batches:
            delta = attack_pgd(model, x, y, 3)
            loss = nn.functional.cross_entropy(model(x + delta), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        correct = 0
        for x, y in batches:
            delta = attack_pgd(model, x, y, 5)
            with torch.no_grad():
                correct += int(model(x + delta).argmax(1).eq(y).sum())
        accuracy = correct / 64
    return accuracy


if __name__ == "__main__":
    torch.manual_seed(0)
    print(f"robust accuracy {run():.2f}")
