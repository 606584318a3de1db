"""An action-recognition trainer that resumes the model, the optimizer and the epoch, but
not its scheduler, a StepLR with step_size=1.

Such a scheduler multiplies the learning rate the optimizer holds by gamma at every step,
whatever its count. The optimizer's restored state brings the decayed rate back, and the
next step multiplies it again: the schedule goes on where it stopped without its own
state. Nothing restarts, so nothing is reported.
"""

import os
import tempfile

import torch
from torch import nn
from torch.optim.lr_scheduler import StepLR


def train(path: str, epochs: int, resume: bool) -> float:
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.9)
    start = 0
    if resume and os.path.isfile(path):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start = checkpoint["epoch"]
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    for epoch in range(start, epochs):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        scheduler.step()
        state = {
            "epoch": epoch + 1,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
        }
        torch.save(state, path)
    return optimizer.param_groups[0]["lr"]


if __name__ == "__main__":
    checkpoint = os.path.join(tempfile.gettempdir(), "td905-per-step-decay.pt")
    train(checkpoint, 3, resume=False)
    resumed = train(checkpoint, 6, resume=True)
    # the same rate as six epochs in one go: 1e-3 * 0.9**6
    assert abs(resumed - 1e-3 * 0.9**6) < 1e-12, resumed
