"""Evaluation without autograd: `torch.no_grad()` as a block, `inference_mode` as a
decorator of the `Evaluator` method.
"""

import torch
from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))


def evaluate(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        predictions = model(inputs).argmax(1)
    return (predictions == labels).float().mean().item()


class Evaluator:
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    @torch.inference_mode()
    def score(self, inputs: torch.Tensor) -> torch.Tensor:
        self.model.eval()
        return self.model(inputs).softmax(1)


def main() -> None:
    torch.manual_seed(0)
    model = make_model()
    inputs, labels = torch.randn(64, 10), torch.randint(0, 2, (64,))
    print(f"accuracy {evaluate(model, inputs, labels):.2f}")
    print(f"grad recorded: {Evaluator(model).score(inputs).requires_grad}")


if __name__ == "__main__":
    main()
