"""A fine-tuning loop that skips to the next batch except on evaluation steps.

`if not step or step % EVAL_EVERY != 0: continue` leaves the rest of the loop body for
every EVAL_EVERY-th step: `empty_cache()` after it runs once per evaluation, handing the
training step's cached blocks back before the evaluation allocates its own, not on
every step.
"""

import torch
from torch import nn

EVAL_EVERY = 50


def evaluate(model: nn.Module, data: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        loss = model(data).pow(2).mean().item()
    model.train()
    return loss


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(64, 16)
    for step, batch in enumerate(data.split(4) * 20, start=1):
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()
        if not step or step % EVAL_EVERY != 0:
            continue
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        print(f"step {step}: evaluation loss {evaluate(model, data):.4f}")


if __name__ == "__main__":
    main()
