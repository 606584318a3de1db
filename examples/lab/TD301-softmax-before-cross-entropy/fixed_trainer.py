"""The trainer-class shape fixed: the model returns logits and the trainer's
CrossEntropyLoss applies log_softmax once.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, CLASSES))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.body(images)


class Trainer:
    def __init__(self, model: nn.Module, lr: float) -> None:
        self.model = model
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(images), labels)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, loader: DataLoader, epochs: int) -> None:
        for epoch in range(epochs):
            for images, labels in loader:
                last = self.step(images, labels)
            print(f"epoch {epoch}: loss {last:.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    labels = torch.randint(0, CLASSES, (256,))
    images = torch.randn(CLASSES, 64)[labels] + 0.5 * torch.randn(256, 64)
    Trainer(Classifier(), lr=0.1).fit(DataLoader(TensorDataset(images, labels), batch_size=32), 2)
