"""The same classifier written Lightning-style: ``training_step`` calls ``self(x)``.

The module's own ``forward`` ends in softmax and its ``training_step`` hands that to
CrossEntropyLoss, which applies log_softmax again: the same double softmax as the plain
loop, reached through ``self`` instead of a model variable.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


class LitClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, CLASSES))
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.body(images.flatten(1)), dim=1)

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        images, labels = batch
        probabilities = self(images)
        return self.criterion(probabilities, labels)  # expect[lint]: TD301

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def fit(module: LitClassifier, loader: DataLoader, epochs: int) -> None:
    optimizer = module.configure_optimizers()
    for _ in range(epochs):
        for index, batch in enumerate(loader):
            optimizer.zero_grad()
            module.training_step(batch, index).backward()  # expect[run]: TD301
            optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    labels = torch.randint(0, CLASSES, (256,))
    images = torch.randn(CLASSES, 64)[labels] + 0.5 * torch.randn(256, 64)
    fit(LitClassifier(), DataLoader(TensorDataset(images, labels), batch_size=32), epochs=2)
