"""Evaluation that means to run without autograd, but calls `torch.no_grad()` bare.

`torch.no_grad()` is a context manager: called as a statement it does nothing, so every
evaluation forward still records a graph. The second style does it inside an
`Evaluator` method.
"""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))


def evaluate(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    torch.no_grad()  # expect: TD225
    predictions = model(inputs).argmax(1)
    return (predictions == labels).float().mean().item()


class Evaluator:
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def score(self, inputs: torch.Tensor) -> torch.Tensor:
        self.model.eval()
        torch.inference_mode()  # expect: TD225
        return self.model(inputs).softmax(1)


def main() -> None:
    torch.manual_seed(0)
    model = make_model()
    inputs, labels = torch.randn(64, 10), torch.randint(0, 2, (64,))
    print(f"accuracy {evaluate(model, inputs, labels):.2f}")
    print(f"grad recorded: {Evaluator(model).score(inputs).requires_grad}")


if __name__ == "__main__":
    main()
