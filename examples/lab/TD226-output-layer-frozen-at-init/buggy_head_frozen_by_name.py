"""Transfer learning that attaches a new classifier and then freezes it by mistake.

The recipe meant to freeze the backbone, but its second loop walks the new head's
parameters: the head keeps its random weights for the whole run, and only the backbone
bends towards whatever that random projection happens to separate.
"""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 100)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(inputs))


def main() -> None:
    torch.manual_seed(0)
    model = Net()
    model.head = nn.Linear(32, 4)
    for param in model.head.parameters():
        param.requires_grad = False  # expect[lint]: TD226
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    inputs = torch.randn(256, 10)
    labels = inputs[:, :4].argmax(dim=1)
    for _ in range(30):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
