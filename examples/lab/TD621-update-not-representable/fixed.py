"""A regression model trained with bfloat16 compute and float32 weights.

The weights stay in float32 (the master copy AdamW updates), and the forward pass runs in
bfloat16 under `torch.autocast`: every update of about the learning rate is kept.
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
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(120):
        batch = torch.randint(0, len(x), (64,))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            prediction = model(x[batch])
        loss = nn.functional.mse_loss(prediction.float(), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 40 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
