"""Fine-tuning a pretrained feature extractor with discriminative learning rates.

The usual recipe gives the backbone a tenth of the head's learning rate, so the pretrained
features move gently while the new head learns fast. Here "a tenth" is written with floor
division: `LR // 10` is `1e-3 // 10`, which is 0.0, not 1e-4. The backbone's parameters
are in the optimizer and get gradients every step, but its group's learning rate is 0:
they never change, and the model only ever trains its last layer.
"""

import torch
from torch import nn

FEATURES = 32
LR = 1e-3


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
    model = Classifier(classes=5)  # stands for a checkpoint pretrained on a related task
    optimizer = torch.optim.Adam([  # expect[run]: TD218
        {"params": model.backbone.parameters(), "lr": LR // 10},  # 0.0: floor division
        {"params": model.head.parameters(), "lr": LR},
    ])
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
