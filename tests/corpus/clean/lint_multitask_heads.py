"""Two task heads on a shared trunk: a weighted sum of a classification and a regression loss."""

import torch
from torch import nn
from torch.nn import functional as F


class MultiTask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Dropout(0.1))
        self.classify = nn.Linear(64, 4)
        self.regress = nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(x)
        return self.classify(features), self.regress(features).squeeze(-1)


def losses(
    model: nn.Module, x: torch.Tensor, labels: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    logits, predicted = model(x)
    return F.cross_entropy(logits, labels) + 0.5 * F.smooth_l1_loss(predicted, values)


def main() -> None:
    torch.manual_seed(0)
    model = MultiTask()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(256, 10)
    labels, values = x[:, :4].argmax(dim=1), x.sum(dim=1)
    data = torch.utils.data.TensorDataset(x, labels, values)
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    for _ in range(2):
        model.train()
        for inputs, label, value in loader:
            optimizer.zero_grad()
            losses(model, inputs, label, value).backward()
            optimizer.step()
    print("trained")


if __name__ == "__main__":
    main()
