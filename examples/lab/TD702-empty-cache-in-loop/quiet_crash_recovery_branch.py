"""A contrastive pre-training loop that recovers from a crashed step.

When the loss turns NaN the step sets `resume`, and the recovery branch empties the CUDA
cache and reloads the last checkpoint before training goes on. The cache is emptied only
on that rare path, never on an ordinary step.
"""

import math
import os
import tempfile

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    last = os.path.join(tempfile.mkdtemp(), "last.pt")
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 0}
    torch.save(state, last)
    x = torch.randn(32, 16)
    for step in range(20):
        optimizer.zero_grad()
        loss = ((model(x) - x) ** 2).mean()
        if step == 7:
            loss = loss * float("nan")  # a crashed step, as a loss spike would give
        resume = math.isnan(loss.item())
        if resume:
            torch.cuda.empty_cache()
            state = torch.load(last, map_location="cpu", weights_only=True)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            continue
        loss.backward()
        optimizer.step()
        if step % 5 == 0:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            torch.save(state, last)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
