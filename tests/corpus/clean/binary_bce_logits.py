"""Binary classification with BCEWithLogitsLoss on raw logits, class-imbalance weighted.

The model outputs one logit per example; it is squeezed to [N] to match the float [N]
targets. `torch.sigmoid` appears only when computing metrics, never before the loss.
"""

import torch
from torch import nn


def make_data(n, generator):
    x = torch.randn(n, 10, generator=generator)
    score = x[:, 0] + 0.5 * x[:, 1] - 0.25 * x[:, 2]
    y = (score > 1.0).float()  # about 20% positives
    return x, y


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def make():
    torch.manual_seed(0)
    x, y = make_data(128, torch.Generator().manual_seed(20))
    model = Scorer()
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(4.0))
    return model, (x, y), criterion, torch.optim.Adam(model.parameters(), lr=5e-3)


def main():
    model, (x, y), criterion, optimizer = make()
    x_val, y_val = make_data(200, torch.Generator().manual_seed(21))
    for epoch in range(80):
        model.train()
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        if epoch % 20 == 19:
            model.eval()
            with torch.no_grad():
                probabilities = torch.sigmoid(model(x_val))
                predicted = probabilities > 0.5
                recall = (predicted & (y_val == 1)).sum() / (y_val == 1).sum().clamp(min=1)
            print(f"epoch {epoch}: loss {loss.item():.4f} recall {recall.item():.2%}")


if __name__ == "__main__":
    main()
