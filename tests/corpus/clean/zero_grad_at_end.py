"""Gradients cleared at the END of each iteration, with `model.zero_grad()`.

The model starts with no gradient, so clearing after the step (instead of before the
forward) is equivalent. Also logs the loss every 10 steps only, keeps a history of
`loss.item()` values, and summarises it in float64 (statistics, not training).
"""

import torch
from torch import nn

CLASSES = 5


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(20, 64)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.classifier(self.dropout(torch.relu(self.hidden(x))))


def batches(steps, batch_size=32):
    generator = torch.Generator().manual_seed(4)
    centres = torch.randn(CLASSES, 20, generator=generator) * 2
    for _ in range(steps):
        y = torch.randint(0, CLASSES, (batch_size,), generator=generator)
        x = centres[y] + torch.randn(batch_size, 20, generator=generator)
        yield x, y


def main():
    torch.manual_seed(0)
    model = MLP()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    history = []
    model.train()
    for step, (x, y) in enumerate(batches(60)):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        model.zero_grad()
        history.append(loss.item())
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    last = torch.tensor(history[-20:], dtype=torch.float64)
    print(f"last 20 steps: loss {last.mean().item():.4f} +- {last.std().item():.4f}")


if __name__ == "__main__":
    main()
