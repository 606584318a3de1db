"""A trainer class whose loop body is split into methods: forward, backward, update."""

import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.BatchNorm1d(64), nn.ReLU())
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Trainer:
    def __init__(self, model: nn.Module, lr: float) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5)

    def _compute_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.criterion(self.model(x), y)

    def _update(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def train_epoch(self, loader: torch.utils.data.DataLoader) -> float:
        self.model.train()
        total = 0.0
        for x, y in loader:
            loss = self._compute_loss(x, y)
            self._update(loss)
            total += loss.item()
        self.scheduler.step()
        return total / len(loader)

    @torch.no_grad()
    def evaluate(self, loader: torch.utils.data.DataLoader) -> float:
        self.model.eval()
        correct = 0
        for x, y in loader:
            correct += (self.model(x).argmax(dim=1) == y).sum().item()
        return correct / len(loader.dataset)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    data = torch.utils.data.TensorDataset(x, y)
    train = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    valid = torch.utils.data.DataLoader(data, batch_size=64)
    trainer = Trainer(Classifier(8, 2), lr=0.05)
    for epoch in range(3):
        loss = trainer.train_epoch(train)
        print(f"epoch {epoch}: loss {loss:.3f} accuracy {trainer.evaluate(valid):.3f}")


if __name__ == "__main__":
    main()
