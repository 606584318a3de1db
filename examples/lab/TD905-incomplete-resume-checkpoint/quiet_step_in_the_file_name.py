"""A text-to-speech style trainer that keeps the step in the checkpoint's file name.

Every few steps it saves the model and the optimizer to ``<step>.pth.tar``; resuming is
``--restore_step N``, which picks that file and restarts the count from N. The counter
is in the name, not in the dict, and the resume reads it back: nothing is missing.
"""

import argparse
import os
import tempfile

import torch
from torch import nn

SAVE_EVERY, TOTAL = 5, 20


def build(folder: str, restore_step: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if restore_step:
        ckpt = torch.load(os.path.join(folder, f"{restore_step}.pth.tar"), weights_only=True)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    return model, optimizer


def train(folder: str, restore_step: int) -> float:
    torch.manual_seed(restore_step)
    model, optimizer = build(folder, restore_step)
    step = restore_step + 1
    loss = torch.zeros(())
    while step <= TOTAL:
        x = torch.randn(16, 8)
        loss = nn.functional.mse_loss(model(x), x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % SAVE_EVERY == 0:
            torch.save(
                {"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                os.path.join(folder, "{}.pth.tar".format(step)),
            )
        step += 1
    return loss.item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--restore_step", type=int, default=0)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="td905-named-")
    first = train(folder, args.restore_step)
    resumed = train(folder, 10)
    print(f"loss {first:.4f}, after resuming at step 10: {resumed:.4f}")


if __name__ == "__main__":
    main()
