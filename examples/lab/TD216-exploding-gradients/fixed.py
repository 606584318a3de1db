"""Fixed: a peak learning rate in the stable range, and gradients clipped at norm 1.

Clipping bounds every update whatever the rate does, so a spike cannot feed on itself.
"""

import torch
from torch import nn

FEATURES = 16
PEAK_LR = 0.04
WARMUP_STEPS = 200


def make_data(count: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, FEATURES, generator=generator)
    weights = torch.randn(FEATURES, 1, generator=generator)
    return x, x @ weights + 0.1 * torch.randn(count, 1, generator=generator)


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=PEAK_LR, momentum=0.9)
    warmup = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS))
    for step in range(WARMUP_STEPS):
        batch = torch.randint(0, len(x), (64,))
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[batch]), y[batch])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        warmup.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4g} lr {warmup.get_last_lr()[0]:.3g}")


if __name__ == "__main__":
    main()
