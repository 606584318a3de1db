"""Fine-tuning a pretrained feature extractor on a new task with 5 classes.

The optimizer is built from the model's parameters, and *then* the old 10-class head is
swapped for a new 5-class one. The new head's parameters are in no optimizer: they get
gradients at every step and never change, so the classifier stays at its random
initialisation while the backbone contorts itself to fit it.
"""

import torch
from torch import nn

FEATURES = 32


class Classifier(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(),
                                      nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def make_data(count: int = 2048, classes: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    return x, (x[:, :classes] * 2).argmax(dim=1)


def main() -> None:
    torch.manual_seed(0)
    model = Classifier(classes=10)  # stands for a checkpoint trained on the old task
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.head = nn.Linear(64, 5)  # expect: TD218
    x, y = make_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=64, shuffle=True)
    for epoch in range(2):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
