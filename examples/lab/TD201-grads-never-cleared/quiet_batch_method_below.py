"""A trainer whose epoch loop calls a batch method defined further down the class.

`train_epoch()` runs `self.train_one_batch()`, then `backward()` and `step()`; the batch
method, defined below the loop, clears the gradients first. Correct: the loop clears
through a method lint reads after the one it is in.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader) -> None:
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_epoch(self) -> float:
        self.model.train()
        total = 0.0
        for inputs, targets in self.loader:
            loss = self.train_one_batch(inputs, targets)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.loader)

    def train_one_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        return nn.functional.mse_loss(self.model(inputs), targets)


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(128, 4)
    data = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
    trainer = Trainer(nn.Linear(4, 1), DataLoader(data, batch_size=32))
    for epoch in range(3):
        print(f"epoch {epoch}: loss {trainer.train_epoch():.4f}")


if __name__ == "__main__":
    main()
