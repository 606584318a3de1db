"""A trainer that always wraps its model in DataParallel and saves the wrapper's state at
the end of training, for the record: nothing in the project reads the file back.

Every key does start with `module.`, so a plain model would have to strip it. But no
code of this project makes such a read, so no run of it breaks: information, naming the
save, not a warning.
"""

import os
import tempfile

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    net = nn.DataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    inputs, labels = torch.randn(128, 8), torch.randint(0, 2, (128,))
    for _ in range(10):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(inputs), labels)
        loss.backward()
        optimizer.step()
    path = os.path.join(tempfile.gettempdir(), "td805-nothing-loads-it-back.pt")
    state = net.state_dict()  # expect[lint]: TD805
    torch.save({"model": state, "loss": loss.item()}, path)
    print(f"loss {loss.item():.4f}; saved {len(state)} tensors, first key {next(iter(state))}")


if __name__ == "__main__":
    main()
