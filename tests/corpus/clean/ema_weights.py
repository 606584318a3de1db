"""An exponential moving average of the weights, updated after every optimizer step.

The EMA copy is a deep copy with `requires_grad_(False)`, updated in place under
`torch.no_grad()` with `mul_().add_()` (no `.data`), buffers copied over, and evaluated
in eval mode.
"""

import copy

import torch
from torch import nn

DECAY = 0.95


@torch.no_grad()
def update_ema(ema_model, model, decay=DECAY):
    for ema_param, param in zip(ema_model.parameters(), model.parameters()):
        ema_param.mul_(decay).add_(param, alpha=1 - decay)
    for ema_buffer, buffer in zip(ema_model.buffers(), model.buffers()):
        ema_buffer.copy_(buffer)


def make_batch(generator, size=64):
    x = torch.randn(size, 10, generator=generator)
    y = (x[:, 0] - x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    return x, y


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(31)
    model = nn.Sequential(nn.Linear(10, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 3))
    ema_model = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()

    for step in range(100):
        model.train()
        x, y = make_batch(generator)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        update_ema(ema_model, model)

        if step % 25 == 24:
            ema_model.eval()
            x_val, y_val = make_batch(generator, 256)
            with torch.no_grad():
                accuracy = (ema_model(x_val).argmax(dim=1) == y_val).float().mean()
            print(f"step {step}: loss {loss.item():.4f} EMA accuracy {accuracy.item():.2%}")


if __name__ == "__main__":
    main()
