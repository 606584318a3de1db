"""A trainer class that accumulates gradients, with the accumulation split into helpers.

``backward()`` runs on every micro-batch and ``step_if_ready()`` steps and clears only
every ``accumulate`` micro-batches, but the loss is never divided by ``accumulate``: each
step applies the sum of eight batches' gradients, as if the learning rate were 8x.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AccumulatingTrainer:
    def __init__(self, model: nn.Module, accumulate: int) -> None:
        self.model = model
        self.accumulate = accumulate
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        self.micro_step = 0

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()  # expect[lint,run]: TD618

    def step_if_ready(self) -> None:
        self.micro_step += 1
        if self.micro_step % self.accumulate == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()

    def train_epoch(self, loader: DataLoader) -> None:
        for inputs, targets in loader:
            self.backward(nn.functional.mse_loss(self.model(inputs), targets))
            self.step_if_ready()


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(512, 8)
    data = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
    trainer = AccumulatingTrainer(nn.Linear(8, 1), accumulate=8)
    for epoch in range(2):
        trainer.train_epoch(DataLoader(data, batch_size=16, shuffle=True))
    print("done")
