"""A classifier whose functional dropout follows the module's mode.

`F.dropout(h, p=0.5, training=self.training)` drops units while training and is the
identity after `model.eval()`: every evaluation of the test set gives the same accuracy.
"""

import torch
import torch.nn.functional as F
from torch import nn

FEATURES = 16
CLASSES = 4


def make_split(size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    centers = torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    return centers[labels] + 1.5 * torch.randn(size, FEATURES, generator=generator), labels


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 128)
        self.out = nn.Linear(128, CLASSES)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        hidden = F.relu(self.hidden(inputs))
        hidden = F.dropout(hidden, p=0.5, training=self.training)
        return self.out(hidden)


def make():
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, make_split(64, seed=10), nn.CrossEntropyLoss(), optimizer


def main() -> None:
    model, _, criterion, optimizer = make()
    inputs, labels = make_split(2048, seed=10)
    test_inputs, test_labels = make_split(2048, seed=11)
    for _epoch in range(3):
        model.train()
        order = torch.randperm(len(labels))
        for start in range(0, len(labels), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            loss = criterion(model(inputs[batch]), labels[batch])
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        for attempt in range(3):
            accuracy = (model(test_inputs).argmax(dim=1) == test_labels).float().mean().item()
            print(f"evaluation {attempt}: accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
