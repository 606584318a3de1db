"""A trainer that skips an update whose gradient norm explodes.

After ``backward()`` the gradients are clipped; when their norm was above the limit and
skipping is asked for, the trainer clears them, lets the optimizer step over nothing (so
the step counters stay in line) and leaves the update loop. The clearing is the point of
that branch; the regular path steps with the gradients.
"""

import torch
from torch import nn


def update(model, optimizer, batch, max_norm: float, skip_grad: bool) -> bool:
    x, y = batch
    finished = False
    while not finished:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if torch.isfinite(norm) and norm > max_norm and skip_grad:
            print(f"skipping the update: gradient norm {norm.item():.2f}")
            optimizer.zero_grad(set_to_none=True)
            optimizer.step()
            break
        optimizer.step()
        finished = True
    return finished


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [(torch.randn(8, 4), torch.randn(8, 1) * scale) for scale in (1, 1, 100, 1)]
    for step, batch in enumerate(batches):
        applied = update(model, optimizer, batch, max_norm=20.0, skip_grad=True)
        print(f"step {step}: update applied: {applied}")


if __name__ == "__main__":
    main()
