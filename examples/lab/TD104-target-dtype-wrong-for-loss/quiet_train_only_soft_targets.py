"""A classifier trained on mixup targets, evaluated on class indices, through one loss.

The loss module casts its targets to float only in training mode, where the loader hands
it mixed one-hot rows for a hand-written soft cross-entropy. In evaluation mode the
targets are the original int64 class indices and go to ``cross_entropy`` untouched: the
cast never reaches that call.
"""

import torch
import torch.nn.functional as F
from torch import nn

CLASSES, FEATURES = 4, 8


class MixupLoss(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.training:
            target = target.float()
            return -(F.log_softmax(logits, dim=-1) * target).sum(-1).mean()
        else:
            return F.cross_entropy(logits, target)


def mixed(x: torch.Tensor, y: torch.Tensor, lam: float = 0.7):
    order = torch.randperm(len(x))
    rows = F.one_hot(y, CLASSES)
    return lam * x + (1 - lam) * x[order], lam * rows + (1 - lam) * rows[order]


def main() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(96, FEATURES), torch.randint(0, CLASSES, (96,))
    model, criterion = nn.Linear(FEATURES, CLASSES), MixupLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        criterion.train()
        for start in range(0, 96, 32):
            inputs, soft = mixed(x[start : start + 32], y[start : start + 32])
            optimizer.zero_grad()
            criterion(model(inputs), soft).backward()
            optimizer.step()
        model.eval()
        criterion.eval()
        with torch.no_grad():
            print(f"epoch {epoch}: held-out loss {criterion(model(x), y).item():.3f}")


if __name__ == "__main__":
    main()
