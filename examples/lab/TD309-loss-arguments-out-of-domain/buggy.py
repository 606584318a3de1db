"""Binary classifiers whose loss arguments leave the loss's domain, in three shapes.

1. A plain loop: labels stored as -1/1 (an SVM habit) go straight into
   `BCEWithLogitsLoss`. The loss of a label -1 is lowest for an infinitely *wrong*
   prediction, so the loss goes below 0 and the model learns the opposite of the data.
2. A trainer class whose steps live in helpers: `pos_weight` computed as
   `1 - positives / negatives` is negative when positives are the majority, which turns
   the loss of every positive example into a reward for missing it.
3. A closure given to `optimizer.step()`: 8-bit mask targets (0/255) never scaled to
   [0, 1] before `binary_cross_entropy_with_logits`.
"""

import torch
from torch import nn
from torch.nn import functional as F

FEATURES = 16


def make_data(count: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    direction = torch.randn(FEATURES, generator=generator)
    return x, (x @ direction > -0.5).float()


def plain_loop(x: torch.Tensor, labels: torch.Tensor) -> None:
    model = nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.BCEWithLogitsLoss()
    signs = labels * 2 - 1  # -1/1 labels
    for _ in range(40):
        batch = torch.randint(0, len(x), (64,))
        optimizer.zero_grad()
        loss = criterion(model(x[batch]).squeeze(1), signs[batch])
        loss.backward()  # expect[run]: TD309
        optimizer.step()
    print(f"plain loop: loss {loss.item():.3f}")


class Trainer:
    def __init__(self, labels: torch.Tensor) -> None:
        self.model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        positives = labels.sum()
        self.criterion = nn.BCEWithLogitsLoss(pos_weight=1 - positives / (len(labels) - positives))

    def compute_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.criterion(self.model(x).squeeze(1), y)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = self.compute_loss(x, y)
        loss.backward()  # expect[run]: TD309
        self.optimizer.step()
        return loss.item()


def closure_training(x: torch.Tensor, labels: torch.Tensor) -> None:
    model = nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    masks = labels * 255  # 8-bit masks

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(x).squeeze(1), masks)
        loss.backward()  # expect[run]: TD309
        return loss

    for _ in range(20):
        optimizer.step(closure)


def main() -> None:
    torch.manual_seed(0)
    x, labels = make_data()
    plain_loop(x, labels)
    trainer = Trainer(labels)
    for _ in range(40):
        batch = torch.randint(0, len(x), (64,))
        loss = trainer.train_step(x[batch], labels[batch])
    print(f"trainer: loss {loss:.3f}")
    closure_training(x, labels)


if __name__ == "__main__":
    main()
