"""A trainer class whose per-epoch method steps the schedule first.

``fit()`` calls ``run_epoch()`` once per epoch, and ``run_epoch()`` begins with
``scheduler.step()`` before its batch loop steps the optimizer: on the first call the
schedule advances before any update, so the decay comes one epoch early and PyTorch
warns, the same bug as a scheduler at the top of a single epoch loop.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader) -> None:
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=2, gamma=0.5)

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            loss = self.run_epoch()
            print(f"epoch {epoch}: loss {loss:.4f}, lr {self.scheduler.get_last_lr()[0]:.4f}")

    def run_epoch(self) -> float:
        self.scheduler.step()  # expect[lint]: TD607
        total = 0.0
        for inputs, targets in self.loader:
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(inputs), targets)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.loader)


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs = torch.randn(128, 4)
    data = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
    Trainer(nn.Linear(4, 1), DataLoader(data, batch_size=32)).fit(4)
