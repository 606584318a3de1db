"""Multi-class focal loss for an imbalanced problem, written the popular way on `nll_loss`.

`FocalLoss` computes `log_softmax` itself, scales each log-probability by `(1 - p)^gamma`
and hands the result to `F.nll_loss` with per-class weights. Every entry it passes is a
down-weighted log-probability (<= 0), so the loss is >= 0 and bounded; with `gamma=0` it
is exactly the weighted cross-entropy. The model returns raw logits.
"""

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 4


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, weight=None):
        super().__init__()
        self.gamma = gamma
        self.register_buffer("weight", weight)

    def forward(self, logits, target):
        log_prob = F.log_softmax(logits, dim=-1)
        prob = log_prob.exp()
        return F.nll_loss((1 - prob) ** self.gamma * log_prob, target, weight=self.weight)


def imbalanced_data(n, generator):
    """Class frequencies 70% / 20% / 7% / 3%."""
    labels = torch.multinomial(torch.tensor([0.70, 0.20, 0.07, 0.03]), n, replacement=True,
                               generator=generator)
    centres = torch.randn(CLASSES, 10, generator=torch.Generator().manual_seed(52)) * 1.5
    return centres[labels] + torch.randn(n, 10, generator=generator), labels


def build():
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    alpha = torch.tensor([0.25, 0.75, 1.0, 1.0])
    return model, FocalLoss(gamma=2.0, weight=alpha), torch.optim.Adam(model.parameters(), lr=1e-2)


def make():
    torch.manual_seed(0)
    model, criterion, optimizer = build()
    return model, imbalanced_data(128, torch.Generator().manual_seed(53)), criterion, optimizer


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(54)
    model, criterion, optimizer = build()
    for step in range(100):
        x, y = imbalanced_data(64, generator)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 25 == 0:
            print(f"step {step}: focal loss {loss.item():.4f}")
    x, y = imbalanced_data(1000, generator)
    with torch.no_grad():
        predicted = model(x).argmax(dim=1)
    recall = [((predicted == c) & (y == c)).sum().item() / max(1, (y == c).sum().item()) for c in range(CLASSES)]
    print("per-class recall", [f"{r:.2f}" for r in recall])


if __name__ == "__main__":
    main()
