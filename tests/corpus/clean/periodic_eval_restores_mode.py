"""Validation every N steps inside the training loop, through a helper that restores mode.

`evaluate()` remembers `model.training`, switches to eval under `torch.inference_mode()`
and puts the model back the way it found it, so training continues in train mode.
"""

import torch
from torch import nn

EVAL_EVERY = 20


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.body(x))


def evaluate(model, x, y):
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    finally:
        model.train(was_training)
    return accuracy


def batch(generator, size):
    x = torch.randn(size, 16, generator=generator)
    return x, (x[:, :4] + 0.5 * x[:, 4:8]).argmax(dim=1)


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(33)
    x_val, y_val = batch(generator, 200)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for step in range(1, 81):
        x, y = batch(generator, 32)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if step % EVAL_EVERY == 0:
            print(f"step {step}: loss {loss.item():.4f} val acc {evaluate(model, x_val, y_val):.2%}")


if __name__ == "__main__":
    main()
