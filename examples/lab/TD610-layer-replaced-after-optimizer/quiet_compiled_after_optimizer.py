"""A trainer that builds its optimizer first and compiles the model afterwards, in a helper.

`torch.compile(module)` returns a wrapper that runs the module's own parameters, so
`self.model = torch.compile(self.model)` after the optimizer replaces nothing: the
optimizer still holds every parameter the compiled model trains. (The eager backend keeps
this example quick; the default one shares the parameters the same way.)
"""

import torch
from torch import nn


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self._compile_model()

    def _compile_model(self) -> None:
        self.model = torch.compile(self.model, backend="eager")

    def fit(self, inputs: torch.Tensor, targets: torch.Tensor, steps: int) -> float:
        loss = torch.tensor(0.0)
        for _ in range(steps):
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(inputs), targets)
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(64, 4)
    targets = inputs.sum(dim=1, keepdim=True)
    print(f"final loss {Trainer().fit(inputs, targets, steps=50):.4f}")


if __name__ == "__main__":
    main()
