"""Class-incremental learning: each task trains the network with an optimizer of its own,
then, its training done, widens the classifier for the classes the next task brings.

The widened head is built after the task's optimizer, but that optimizer never steps
again: the next task builds a new one from the new network's parameters. Nothing is
missed.
"""

import torch
from torch import nn, optim


class Learner:
    def __init__(self, features: int, classes: int) -> None:
        self.net = nn.Sequential(nn.Linear(features, 16), nn.ReLU(), nn.Linear(16, classes))

    def _run(
        self,
        batches: list[tuple[torch.Tensor, torch.Tensor]],
        optimizer: optim.Optimizer,
        scheduler: optim.lr_scheduler.LRScheduler,
    ) -> float:
        loss = torch.zeros(())
        for inputs, labels in batches:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(self.net(inputs), labels)
            loss.backward()
            optimizer.step()
        scheduler.step()
        return loss.item()

    def train_task(self, batches: list[tuple[torch.Tensor, torch.Tensor]], new: int) -> float:
        optimizer = optim.SGD(self.net.parameters(), lr=0.1)
        scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1)
        loss = self._run(batches, optimizer, scheduler)
        self._widen(new)
        return loss

    def _widen(self, new: int) -> None:
        old = self.net[2]
        assert isinstance(old, nn.Linear)
        wider = nn.Linear(old.in_features, old.out_features + new)
        with torch.no_grad():
            wider.weight[: old.out_features] = old.weight
            wider.bias[: old.out_features] = old.bias
        self.net[2] = wider


if __name__ == "__main__":
    torch.manual_seed(0)
    learner = Learner(features=8, classes=2)
    for task in range(3):
        classes = 2 * (task + 1)
        data = [(torch.randn(32, 8), torch.randint(0, classes, (32,))) for _ in range(4)]
        print(f"task {task}: loss {learner.train_task(data, new=2):.3f}")
