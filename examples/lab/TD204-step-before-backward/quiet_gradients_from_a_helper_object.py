"""A bilevel search in the DARTS shape: an `Architect` object computes the architecture
weights' gradients, then the loop steps their optimizer, then trains the network weights.

`alpha_optim.step()` runs before the iteration's `loss.backward()`, but right after
`architect.compute_grads(...)` filled the gradients it applies (in a real project that
object lives in another file); the weight optimizer steps after its own backward.
"""

import torch
from torch import nn


class SearchNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ops = nn.ModuleList([nn.Linear(8, 8), nn.Sequential(nn.Linear(8, 8), nn.Tanh())])
        self.alpha = nn.Parameter(torch.zeros(2))
        self.head = nn.Linear(8, 1)

    def weights(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if name != "alpha"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mix = torch.softmax(self.alpha, dim=0)
        return self.head(sum(w * op(x) for w, op in zip(mix, self.ops))).squeeze(-1)


class Architect:
    def __init__(self, model: SearchNet) -> None:
        self.model = model

    def compute_grads(self, x_val: torch.Tensor, y_val: torch.Tensor) -> None:
        loss = nn.functional.mse_loss(self.model(x_val), y_val)
        (grad,) = torch.autograd.grad(loss, [self.model.alpha])
        self.model.alpha.grad = grad


def main() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(512, 8), torch.randn(512)
    model = SearchNet()
    architect = Architect(model)
    w_optim = torch.optim.SGD(model.weights(), lr=0.05)
    alpha_optim = torch.optim.Adam([model.alpha], lr=0.01)
    for start in range(0, 256, 32):
        train_x, train_y = x[start : start + 32], y[start : start + 32]
        val_x, val_y = x[256 + start : 288 + start], y[256 + start : 288 + start]
        alpha_optim.zero_grad()
        architect.compute_grads(val_x, val_y)
        alpha_optim.step()
        w_optim.zero_grad()
        loss = nn.functional.mse_loss(model(train_x), train_y)
        loss.backward()
        w_optim.step()
    print(f"architecture weights {torch.softmax(model.alpha, 0).tolist()}")


if __name__ == "__main__":
    main()
