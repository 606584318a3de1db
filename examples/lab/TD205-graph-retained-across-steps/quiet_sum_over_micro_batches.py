"""A training step that sums the losses of its accumulated micro-batches.

One call of `train_batch` runs `gradient_accumulation_steps` micro-batches, each
backpropagated, and returns their mean loss. The sum lives for one optimizer step and is
dropped with it: memory does not grow from step to step.
"""

import torch
from torch import nn


def train_batch(model, optimizer, data_iter, gradient_accumulation_steps: int) -> float:
    total_loss = 0.0
    optimizer.zero_grad()
    for _ in range(gradient_accumulation_steps):
        x, y = next(data_iter)
        loss = nn.functional.mse_loss(model(x), y) / gradient_accumulation_steps
        loss.backward()
        total_loss += loss
    optimizer.step()
    return float(total_loss)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = iter([(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(8)])
    for step in range(4):
        print(f"step {step}: loss {train_batch(model, optimizer, data, 2):.4f}")


if __name__ == "__main__":
    main()
