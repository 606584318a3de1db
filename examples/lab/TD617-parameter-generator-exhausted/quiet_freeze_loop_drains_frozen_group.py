"""Fine-tuning with a slower learning rate for the encoder, or none at all.

`base_params` and `head_params` are `filter(...)` generators over `model.parameters()`.
When the encoder's learning-rate factor is 0, the loop drains `base_params` to freeze
every encoder parameter, so the optimizer's encoder group is empty. Nothing is lost:
that group would only have held frozen parameters, which get no gradient and which the
optimizer skips. The head's group still gets every head parameter, and with a factor
above 0 the loop does not run and the encoder group gets its parameters.
"""

import torch
from torch import nn


def build_optimizer(model: nn.Sequential, lr: float, base_factor: float) -> torch.optim.Optimizer:
    head_ids = {id(p) for p in model[-1].parameters()}
    base_params = filter(lambda p: id(p) not in head_ids, model.parameters())
    head_params = filter(lambda p: id(p) in head_ids, model.parameters())
    if base_factor == 0:
        for param in base_params:
            param.requires_grad = False
    return torch.optim.Adam(
        [{"params": base_params, "lr": lr * base_factor}, {"params": head_params, "lr": lr}],
        lr=lr,
    )


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = build_optimizer(model, lr=0.01, base_factor=0)
    print("group sizes:", [len(g["params"]) for g in optimizer.param_groups])
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for step in range(3):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
