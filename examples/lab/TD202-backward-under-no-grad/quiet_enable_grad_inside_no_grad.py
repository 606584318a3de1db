"""A loss-weighting optimizer whose ``step`` runs under ``@torch.no_grad()``.

As in PINNacle's adaptive loss weighting: ``step`` is decorated with ``no_grad`` like every
optimizer's, computes its per-term losses inside ``with torch.enable_grad():``, and calls
``backward()`` on them after that block. The losses were recorded with autograd on, so
they have a graph, and ``backward()`` under ``no_grad`` runs on it.
"""

import torch
from torch import nn
from torch.nn import functional as F


class LossWeightedSGD(torch.optim.Optimizer):
    """Plain SGD on a weighted sum of two loss terms, the weights set from their gradients."""

    def __init__(self, params, lr: float = 0.05) -> None:
        super().__init__(params, {"lr": lr})
        self.weights = [1.0, 1.0]

    @torch.no_grad()
    def step(self, closure):
        with torch.enable_grad():
            fit_loss, smooth_loss = closure()
            total = self.weights[0] * fit_loss + self.weights[1] * smooth_loss
        self.zero_grad()
        smooth_loss.backward(retain_graph=True)
        norms = [p.grad.norm() for group in self.param_groups for p in group["params"]]
        self.weights[1] = float(1.0 / (1.0 + torch.stack(norms).sum()))
        self.zero_grad()
        total.backward()
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])
        return total


def main() -> None:
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    y = torch.sin(3 * x)
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = LossWeightedSGD(model.parameters())

    def closure():
        out = model(x)
        return F.mse_loss(out, y), (out[1:] - out[:-1]).pow(2).mean()

    for _ in range(20):
        loss = optimizer.step(closure)
    print(f"loss {loss.item():.4f}, smoothness weight {optimizer.weights[1]:.3f}")


if __name__ == "__main__":
    main()
