"""A regression model trained in bfloat16 with no float32 copy of its weights.

The whole model is cast to bfloat16 to save memory, and AdamW updates the bfloat16
weights directly. AdamW's step is about the learning rate (1e-4), far below half the
spacing of bfloat16 numbers near weights of this size, so most updates are rounded away
and the loss barely moves. fixed.py keeps the weights in float32 and computes the forward
pass in bfloat16 with `torch.autocast`.
"""

import torch
from torch import nn


def make_data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 16)
    return x, x[:, :4].sum(1, keepdim=True) * 0.5


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1))


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data(2048)
    model = make_model().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # expect[run]: TD621
    for step in range(120):
        batch = torch.randint(0, len(x), (64,))
        loss = nn.functional.mse_loss(model(x[batch].bfloat16()).float(), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 40 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
