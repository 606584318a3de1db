"""A training loop with two debug plots that never pile up.

The first plot sits under `DEBUG = False`, so it never runs; the second, asked for on the
command line, plots one batch, saves it and ends the program with `sys.exit()`. Neither
opens more than one figure, however long the run.
"""

import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


def train(dump_first_batch: bool) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(64, 4)
    targets = inputs.sum(dim=1, keepdim=True)
    for step in range(50):
        DEBUG = False
        if DEBUG:
            plt.figure(figsize=(4, 3))
            plt.scatter(inputs[:, 0], targets[:, 0])
            plt.savefig("debug_step.png")
        if dump_first_batch:
            plt.figure(figsize=(4, 3))
            plt.hist(inputs.flatten().numpy(), bins=20)
            plt.savefig("first_batch.png")
            sys.exit(0)
        optimizer.zero_grad()
        loss = F.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
    print(round(loss.item(), 4))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump-first-batch", action="store_true")
    train(parser.parse_args().dump_first_batch)
