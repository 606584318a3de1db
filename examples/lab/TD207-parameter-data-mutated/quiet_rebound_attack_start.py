"""A PGD attack whose restart point is a new leaf, written through `.data` before use.

The first forward only reads the output's shape. The attack then binds `x_adv` to a new
leaf made from the data plus random noise, and copies the adversarial examples already
found into it through `.data`: that tensor is new memory that no earlier operation saved,
and the forward that backward differentiates runs after the write, in the loop.
"""

import torch
from torch import nn


def attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float = 0.1) -> torch.Tensor:
    found = torch.zeros(x.shape[0], dtype=torch.bool)
    best = x.clone()
    x_adv = x.clone().requires_grad_(True)
    direction = torch.ones_like(model(x_adv)).uniform_(-1, 1)
    noise = torch.empty_like(x).uniform_(-eps, eps)
    x_adv = (x.detach() + noise).requires_grad_(True)
    x_adv.data[found] = best.data[found]
    for _ in range(10):
        out = model(x_adv)
        loss = nn.functional.cross_entropy(out, y) + 1e-3 * (out * direction).sum()
        loss.backward()
        with torch.no_grad():
            x_adv += eps / 4 * x_adv.grad.sign()
            x_adv.clamp_(x - eps, x + eps)
            found |= out.argmax(1) != y
            best[found] = x_adv[found]
        x_adv.grad = None
    return best


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    adversarial = attack(model, x, y)
    print(f"changed predictions: {(model(adversarial).argmax(1) != model(x).argmax(1)).sum()}")


if __name__ == "__main__":
    main()
