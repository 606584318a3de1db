"""Transfer learning that attaches a new classifier head after building the optimizer.

The optimizer holds the parameters that existed when it was built: the old 10-class head
(no longer used) and the backbone. The new 3-class head receives gradients but is never
updated, so it keeps its random initialisation for the whole run.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 16
HIDDEN = 32
NUM_CLASSES = 3


class Classifier(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU())
        self.head = nn.Linear(HIDDEN, num_classes)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(inputs))


def make_dataset(size: int = 600) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = inputs[:, :3].argmax(dim=1)
    return TensorDataset(inputs, targets)


def main() -> None:
    torch.manual_seed(0)
    loader = DataLoader(make_dataset(), batch_size=50, shuffle=True)
    model = Classifier(num_classes=10)  # stands in for a pretrained 10-class network
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.head = nn.Linear(HIDDEN, NUM_CLASSES)  # expect: TD610
    head_before = model.head.weight.detach().clone()
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        correct = 0
        for inputs, targets in loader:
            optimizer.zero_grad()
            logits = model(inputs)
            loss = criterion(logits, targets)
            loss.backward()
            optimizer.step()
            correct += int((logits.argmax(dim=1) == targets).sum())
        print(f"epoch {epoch}: loss {loss.item():.4f}, accuracy {correct / 600:.3f}")
    moved = (model.head.weight - head_before).abs().max().item()
    print(f"largest change of a head weight: {moved:.4f}")


if __name__ == "__main__":
    main()
